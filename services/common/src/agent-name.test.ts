import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AGENT_NAMES, Agent, agentEnum, agentName, requireAgentName } from './agent-name.js';
import { InvalidArgumentError } from './errors.js';

test('when every agent name goes to its enum and back, then it is the same name, and the wire values stay 1 and 2', () => {
  for (const name of AGENT_NAMES) assert.equal(agentName(agentEnum(name)), name);
  assert.equal(agentEnum('browser-agent'), 1);
  assert.equal(agentEnum('browsercode'), 2);
});

test('when the agent is unset or unknown, then it has no name and a request that needs one is refused', () => {
  assert.equal(agentEnum(null), Agent.AGENT_UNSPECIFIED);
  assert.equal(agentName(Agent.AGENT_UNSPECIFIED), null);
  assert.equal(agentName(Agent.UNRECOGNIZED), null);
  assert.throws(() => requireAgentName(Agent.AGENT_UNSPECIFIED), InvalidArgumentError);
});
