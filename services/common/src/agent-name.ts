/** The agent's REST name ↔ its proto enum (ats.common.v1.Agent): the one table of it. */
import { Agent } from '../../../gen/ats/common/v1/common.js';
import { InvalidArgumentError } from './errors.js';

export { Agent };

/** REST names of the agents, browser-agent first. */
export const AGENT_NAMES = ['browser-agent', 'browsercode'] as const;
/** An agent's REST name (and its value in every database column that names an agent). */
export type AgentName = (typeof AGENT_NAMES)[number];

/** Whether `s` names an agent. */
export function isAgentName(s: string): s is AgentName {
  return (AGENT_NAMES as readonly string[]).includes(s);
}

const ENUM_OF: Record<AgentName, Agent> = {
  'browser-agent': Agent.AGENT_BROWSER_AGENT,
  browsercode: Agent.AGENT_BROWSERCODE,
};
const NAME_OF = new Map<Agent, AgentName>(AGENT_NAMES.map((n) => [ENUM_OF[n], n]));

/** The enum value of a name; none (a standalone browser, a workspace file) is AGENT_UNSPECIFIED. */
export function agentEnum(name: AgentName | null | undefined): Agent {
  return name ? ENUM_OF[name] : Agent.AGENT_UNSPECIFIED;
}

/** The name of an enum value; null for AGENT_UNSPECIFIED (or a value this build does not know). */
export function agentName(agent: Agent): AgentName | null {
  return NAME_OF.get(agent) ?? null;
}

/** The name of an enum value that a request must set; INVALID_ARGUMENT when it is unset or unknown. */
export function requireAgentName(agent: Agent): AgentName {
  const name = agentName(agent);
  if (!name) throw new InvalidArgumentError('agent is required');
  return name;
}

