/**
 * The agent registry (DESIGN §2 "Agents"): what each agent is for and how it is watched. Every
 * example task is also one the builtin model completes (test/readme-examples.test.ts runs each
 * against stand-ins for the pages it names), so a new user can try them without an LLM: each opens
 * the page it reads, and a file it reads from the disk is one the user attaches.
 */
import { agentEnum } from '../../common/src/agent-name.js';
import { Capability, SessionKind, WatchVerb, type AgentInfo } from '../../../gen/ats/run/v1/run.js';

export const AGENTS: readonly AgentInfo[] = [
  {
    name: 'browser-agent',
    agent: agentEnum('browser-agent'),
    capabilities: [Capability.CAPABILITY_BROWSER, Capability.CAPABILITY_FILES],
    sessionKind: SessionKind.SESSION_KIND_DISPOSABLE,
    watch: WatchVerb.WATCH_VERB_STEPS,
    run: 'POST /api/v1/agents/browser-agent/runs',
    bestFor: [
      'Navigating websites, clicking, filling forms and extracting what a page shows.',
      'Questions answered by reading one or a few pages; the answer comes back inline in result.',
      'Logged-in work with a saved browser profile.',
    ],
    notFor: [
      'Processing data or producing large outputs as files (use browsercode).',
      'Work that needs code or a terminal.',
    ],
    exampleTasks: [
      'Open https://example.com and tell me the page title.',
      'Open https://example.com/pricing and return the plans as JSON: [{"name": string, "priceUsd": number}].',
    ],
  },
  {
    name: 'browsercode',
    agent: agentEnum('browsercode'),
    capabilities: [Capability.CAPABILITY_BROWSER, Capability.CAPABILITY_CODE, Capability.CAPABILITY_TERMINAL, Capability.CAPABILITY_FILES],
    sessionKind: SessionKind.SESSION_KIND_DURABLE,
    watch: WatchVerb.WATCH_VERB_EVENTS,
    run: 'POST /api/v1/agents/browsercode/runs',
    bestFor: [
      'Multi-step work that mixes a browser with code, files and a terminal.',
      'Data processing whose result is a file (CSV, JSON, reports) fetched with kind=output.',
      'Conversations that keep files on a disk across turns.',
    ],
    notFor: ['A quick answer from one page (browser-agent is faster).'],
    exampleTasks: [
      "Download the table on https://example.com/sales, save it to sales.csv, then run `awk -F, 'NR>1 {s+=$2} END {print s}' sales.csv`.",
      'Read input.json from the disk, keep the entries with status "open" and save them to open.json.',
    ],
  },
];
