import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { SPECS, type ActionName } from './actions.js';
import { BuiltinModel, findElement, parseClause, parseTask, splitClauses, splitInstructions } from './builtin-model.js';
import { ElementNotFound, ModelError, NeedsBrowser, type DecideInput, type PageElement } from './model.js';
import { AGENTS } from '../agents.js';
import { deliverExtract } from './page-extract.js';

const disk = fs.mkdtempSync(path.join(os.tmpdir(), 'ats-builtin-'));
after(() => fs.rmSync(disk, { recursive: true, force: true }));

const el = (index: number, over: Partial<PageElement>): PageElement => ({ index, tag: 'input', role: '', type: 'text', text: '', label: '', placeholder: '', name: '', id: '', href: '', ...over });

test('when a task is split, then sentences and lines separate but quotes and URLs stay whole', () => {
  assert.deepEqual(splitInstructions("Open http://127.0.0.1:8080/form.html. Type 'Hello. World' into 'Name'.\nThen click 'Send'; extract the heading"), [
    'Open http://127.0.0.1:8080/form.html',
    "Type 'Hello. World' into 'Name'",
    "click 'Send'",
    'extract the heading',
  ]);
  assert.deepEqual(splitInstructions('1. Go to example.com\n2. Read the page\'s title.'), ['Go to example.com', "Read the page's title"]);
});

test('when explicit instructions are parsed, then each becomes its intent', () => {
  const parsed = parseTask(
    [
      'Open http://localhost:1234/a.html',
      "Fill in 'Email' with 'ada@example.com'",
      'Type "Ada Lovelace" into the "Full name" field and submit',
      "Select 'Blue' from the 'Colour' dropdown",
      'Press Enter',
      'Click the link "Next page"',
      'Scroll down to the bottom',
      "Wait for 'Thank you'",
      "Upload 'cv.pdf' into 'Resume'",
      'Extract the table as JSON',
      "Get the text of '#confirmation'",
      'List all links',
      'Read the main heading',
      "Answer 'ok'",
    ].join('\n'),
  ).map((i) => i.intent);
  assert.deepEqual(parsed, [
    { kind: 'navigate', url: 'http://localhost:1234/a.html' },
    { kind: 'type', value: 'ada@example.com', target: 'Email', submit: false },
    { kind: 'type', value: 'Ada Lovelace', target: 'Full name', submit: true },
    { kind: 'select', value: 'Blue', target: 'Colour' },
    { kind: 'press', key: 'Enter' },
    { kind: 'click', target: 'Next page', hint: 'link' },
    { kind: 'scroll', direction: 'bottom' },
    { kind: 'wait', text: 'Thank you' },
    { kind: 'upload', file: 'cv.pdf', target: 'Resume' },
    { kind: 'extract', what: 'table' },
    { kind: 'extract', what: 'text', target: '#confirmation' },
    { kind: 'extract', what: 'links' },
    { kind: 'extract', what: 'heading' },
    { kind: 'answer', text: 'ok' },
  ]);
});

test('when one instruction cannot be parsed, then the error quotes it', () => {
  assert.throws(() => parseTask('Open http://x.test\nFigure out the cheapest flight to Lisbon\nExtract the title'), (err: unknown) => {
    assert.ok(err instanceof ModelError);
    assert.match(err.message, /cannot follow this step: "Figure out the cheapest flight to Lisbon"/);
    return true;
  });
});

test('when elements are looked up, then labels, placeholders, names and texts match, fields before buttons', () => {
  const els = [el(1, { label: 'Full name' }), el(2, { placeholder: 'you@example.com', name: 'email' }), el(3, { tag: 'button', type: 'submit', text: 'Submit order' }), el(4, { tag: 'a', text: 'Next page', href: 'x' }), el(5, { type: 'file', label: 'Resume' })];
  assert.equal(findElement(els, 'full name', 'field')?.index, 1);
  assert.equal(findElement(els, 'Email', 'field')?.index, 2);
  assert.equal(findElement(els, 'Submit', 'click')?.index, 3);
  assert.equal(findElement(els, 'next page', 'click', 'link')?.index, 4);
  assert.equal(findElement(els, 'Resume', 'file')?.index, 5);
  assert.equal(findElement(els, 'Nowhere', 'click'), undefined);
});

test('when the builtin model runs, then it walks the instructions, resolves elements and answers with what it extracted', async () => {
  const model = new BuiltinModel("Type 'Ada' into 'Name'. Click 'Send'. Extract the heading.");
  const observation = { url: 'http://t/form', title: 'Form', text: '', tabs: [], elements: [el(7, { label: 'Name' }), el(8, { tag: 'button', text: 'Send' })] };
  const input: DecideInput = { task: '', toolset: 'browser', turns: [], observation, history: [], diskFiles: [] };
  const signal = new AbortController().signal;
  const d1 = await model.decide(input, signal);
  assert.deepEqual(d1.action, { name: 'type', index: 7, text: 'Ada', submit: false });
  input.history.push({ thought: d1.thought, action: d1.action });
  assert.deepEqual((await model.decide(input, signal)).action, { name: 'click', index: 8 });
  const d3 = await model.decide(input, signal);
  assert.deepEqual(d3.action, { name: 'extract', what: 'heading' });
  input.history.push({ thought: d3.thought, action: d3.action, extracted: 'Thanks, Ada' });
  assert.deepEqual((await model.decide(input, signal)).action, { name: 'done', result: 'Thanks, Ada' });
});

test('when a named element is not on the page, then the model says which', async () => {
  const model = new BuiltinModel("Click 'Missing'");
  await assert.rejects(model.decide({ task: '', toolset: 'browser', turns: [], observation: { url: 'http://t/', title: '', text: '', tabs: [], elements: [] }, history: [], diskFiles: [] }, new AbortController().signal), ElementNotFound);
});

test('when browsercode instructions are parsed, then commands, writes, saves, reads and listings are understood; form fields are not taken for files', () => {
  const parsed = parseTask(
    [
      'Run `python3 -c "print(6*7)" > answer.txt`',
      "Write 'hello world' to notes/hello.txt",
      'Save the result to out.json',
      "Save the table as JSON to 'data/table.json'",
      'Read file notes/hello.txt',
      'List the files',
      "Write 'Ada' into 'Name'",
    ].join('\n'),
    'code',
  );
  assert.deepEqual(
    parsed.map((p) => p.intent),
    [
      { kind: 'shell', command: 'python3 -c "print(6*7)" > answer.txt' },
      { kind: 'write', content: 'hello world', path: 'notes/hello.txt' },
      { kind: 'save', path: 'out.json' },
      { kind: 'save', path: 'data/table.json' },
      { kind: 'read_file', path: 'notes/hello.txt' },
      { kind: 'list_files' },
      { kind: 'type', value: 'Ada', target: 'Name', submit: false },
    ],
  );
});

test('when browser-agent is given a terminal instruction, then the run is refused naming browsercode', () => {
  assert.throws(() => parseTask('Run `ls`'), (e: unknown) => e instanceof ModelError && /browsercode/.test(e.message));
});

test('when browsercode has no browser yet and an instruction needs a page, then the model asks for one; a save writes the last finding', async () => {
  const model = new BuiltinModel("Run `echo 42`. Save it to out.txt. Click 'Send'", 'code');
  const input: DecideInput = { task: '', toolset: 'code', turns: [], observation: undefined, history: [], diskFiles: [] };
  const signal = new AbortController().signal;
  const d1 = await model.decide(input, signal);
  assert.deepEqual(d1.action, { name: 'shell', command: 'echo 42' });
  input.history.push({ thought: d1.thought, action: d1.action, extracted: '42' });
  const d2 = await model.decide(input, signal);
  assert.deepEqual(d2.action, { name: 'write_file', path: 'out.txt', content: '42\n' });
  input.history.push({ thought: d2.thought, action: d2.action, extracted: 'Wrote out.txt (3 bytes)' });
  await assert.rejects(model.decide(input, signal), NeedsBrowser);
  input.observation = { url: 'about:blank', title: '', text: '', tabs: [], elements: [el(3, { tag: 'button', text: 'Send' })] };
  assert.deepEqual((await model.decide(input, signal)).action, { name: 'click', index: 3 });
});

test('when GET /agents lists example tasks, then the builtin model parses every one for its agent, and each opens a page before acting on one', () => {
  // A new browser shows about:blank: "Go to the pricing page" there has nothing to click.
  const onPage = ['click', 'click_nth', 'type', 'select', 'search', 'press', 'scroll', 'back', 'wait', 'extract', 'find_text', 'upload', 'tab'];
  const opensFirst = (task: string, toolset: 'browser' | 'code') => {
    const kinds = parseTask(task, toolset).map((i) => i.intent.kind);
    const first = kinds.findIndex((k) => onPage.includes(k));
    return first === -1 || kinds.slice(0, first).includes('navigate');
  };
  for (const a of AGENTS) {
    for (const task of a.exampleTasks) assert.ok(opensFirst(task, a.name === 'browsercode' ? 'code' : 'browser'), `${a.name}: ${task}`);
  }
  assert.equal(opensFirst('Go to the pricing page and return the plans as JSON.', 'browser'), false);
  assert.deepEqual(
    parseTask(AGENTS[0]!.exampleTasks[0]!).map((i) => i.intent),
    [
      { kind: 'navigate', url: 'https://example.com' },
      { kind: 'extract', what: 'title' },
    ],
  );
});

test('when clauses are joined by "and", "then" or commas, then each is an instruction; quotes, URLs and names with "and" stay whole', () => {
  assert.deepEqual(splitInstructions("Open http://x.test/a?b=1,2, type 'Ada, Countess' into 'Name' and then click 'Save and close', then read the heading"), [
    'Open http://x.test/a?b=1,2',
    "type 'Ada, Countess' into 'Name'",
    "click 'Save and close'",
    'read the heading',
  ]);
  assert.deepEqual(splitInstructions('Click Terms and Conditions and extract the text'), ['Click Terms and Conditions', 'extract the text']);
  assert.deepEqual(splitInstructions("Type 'Ada' into 'Name' and submit"), ["Type 'Ada' into 'Name' and submit"]);
  assert.deepEqual(splitInstructions('Run `a, and then b; c` then list the files'), ['Run `a, and then b; c`', 'list the files']);
});

test('when a task asks a question about a page, then it opens the page and extracts the answer', () => {
  const intents = (t: string) => parseTask(t).map((i) => i.intent);
  assert.deepEqual(intents('What is the title of https://example.com/a?'), [
    { kind: 'navigate', url: 'https://example.com/a' },
    { kind: 'extract', what: 'title' },
  ]);
  assert.deepEqual(intents('List the links on example.org/docs'), [
    { kind: 'navigate', url: 'example.org/docs' },
    { kind: 'extract', what: 'links' },
  ]);
  assert.deepEqual(intents('Tell me the heading'), [{ kind: 'extract', what: 'heading' }]);
  assert.deepEqual(intents("Search for 'lamps', click the first result and tell me the heading"), [
    { kind: 'search', value: 'lamps' },
    { kind: 'click_nth', nth: 1, of: 'result' },
    { kind: 'extract', what: 'heading' },
  ]);
  assert.deepEqual(intents('Click the second link. Extract the second table. Get the table \'Refunds\'. Find \'Lisbon\' on the page'), [
    { kind: 'click_nth', nth: 2, of: 'link' },
    { kind: 'extract', what: 'table', table: 2 },
    { kind: 'extract', what: 'table', table: 'Refunds' },
    { kind: 'find_text', text: 'Lisbon' },
  ]);
});

test('when a task asks about the page shown now in the usual ways, then the builtin extracts the answer from it without opening another', () => {
  const intents = (t: string) => parseTask(t).map((i) => i.intent);
  const title = [{ kind: 'extract', what: 'title' }];
  const heading = [{ kind: 'extract', what: 'heading' }];
  const url = [{ kind: 'extract', what: 'url' }];
  for (const t of ['What is the title of the current page?', "What's the current page's title?", "What's the title of the page I'm on?", 'Give me the title of this page', 'What is the current title?', 'What is the title of the open page right now?'])
    assert.deepEqual(intents(t), title, t);
  for (const t of ['What is the main heading on this page?', 'What does the main heading say?', 'What is the heading of the page now?', 'Read the main heading of the current page.', "What's the heading at the top of the page?", 'What is the h1 of the current page?', 'And the main heading?'])
    assert.deepEqual(intents(t), heading, t);
  for (const t of ['What is the URL of the current page?', 'And the URL?']) assert.deepEqual(intents(t), url, t);
  for (const t of ['Which page am I on?', 'What is the current page?']) assert.deepEqual(intents(t), [...title, ...url], t);
  assert.deepEqual(intents("What's on the current page?"), [{ kind: 'extract', what: 'text' }]);
  assert.deepEqual(intents(`Open https://example.com/a. What is the main heading of the current page?`), [{ kind: 'navigate', url: 'https://example.com/a' }, ...heading]);
  assert.throws(() => parseTask('What is the weather on this page tomorrow?'), ModelError, 'only the title, heading, URL or text of the page');
});

test('when "the first result" is clicked, then it is the first link with text that leads elsewhere', async () => {
  const model = new BuiltinModel('Click the first result. Click the last link');
  const elements = [el(1, { tag: 'a', text: 'Home', href: 'http://t/s?q=x' }), el(2, { tag: 'a', text: '', href: 'http://t/logo' }), el(3, { tag: 'a', text: 'Lamp', href: 'http://t/lamp' }), el(4, { tag: 'a', text: 'Next', href: 'http://t/s?q=x#more' })];
  const input: DecideInput = { task: '', toolset: 'browser', turns: [], observation: { url: 'http://t/s?q=x', title: '', text: '', tabs: [], elements }, history: [], diskFiles: [] };
  assert.deepEqual((await model.decide(input, new AbortController().signal)).action, { name: 'click', index: 3 });
  assert.deepEqual((await model.decide(input, new AbortController().signal)).action, { name: 'click', index: 4 });
});

test('when a task cannot be parsed, then the error names the clause, its place, how to rephrase it and how to enable an LLM', () => {
  assert.throws(() => parseTask('Open http://x.test, figure out the cheapest flight to Lisbon and extract the title'), (err: unknown) => {
    assert.ok(err instanceof ModelError);
    assert.match(err.message, /cannot follow this step: "figure out the cheapest flight to Lisbon" \(step 1 of 2\)\./);
    assert.match(err.message, /rephrase the step as one of: open <url>; click 'Text'/);
    assert.match(err.message, /OPENAI_BASE_URL/);
    assert.match(err.message, /ANTHROPIC_API_KEY/);
    return true;
  });
});

test('when browsercode keeps some entries and saves them, then the file holds only those; a .csv gets CSV', async () => {
  const model = new BuiltinModel("Read input.json from the disk, keep the entries with status 'open' and save them to open.json. Save it to open.csv", 'code');
  const input: DecideInput = { task: '', toolset: 'code', turns: [], observation: undefined, history: [], diskFiles: ['input.json'] };
  const signal = new AbortController().signal;
  const d1 = await model.decide(input, signal);
  assert.deepEqual(d1.action, { name: 'read_file', path: 'input.json' });
  input.history.push({ thought: d1.thought, action: d1.action, extracted: JSON.stringify([{ id: 1, status: 'open' }, { id: 2, status: 'closed' }, { id: 3, Status: 'Open', note: 'a, "b"' }]) });
  const d2 = await model.decide(input, signal);
  assert.equal(d2.action.name, 'write_file');
  assert.deepEqual(JSON.parse((d2.action as { content: string }).content), [{ id: 1, status: 'open' }, { id: 3, Status: 'Open', note: 'a, "b"' }]);
  input.history.push({ thought: d2.thought, action: d2.action, extracted: 'Wrote open.json' });
  const d3 = await model.decide(input, signal);
  assert.equal((d3.action as { content: string }).content, 'id,status,Status,note\n1,open,,\n3,,Open,"a, ""b"""\n');
});

test('when a long extraction was saved to the disk and the task saves it, then the builtin reads it back whole before writing', async () => {
  const model = new BuiltinModel('Extract the table. Save it to table.csv', 'code');
  const observation = { url: 'http://t/', title: '', text: '', tabs: [], elements: [] };
  const input: DecideInput = { task: '', toolset: 'code', turns: [], observation, history: [], diskFiles: [] };
  const signal = new AbortController().signal;
  const d1 = await model.decide(input, signal);
  const rows = JSON.stringify(Array.from({ length: 300 }, (_, i) => ({ n: String(i), word: 'lamp' })));
  input.history.push({ thought: d1.thought, action: d1.action, extracted: await deliverExtract(rows, 'table', disk) });
  const d2 = await model.decide(input, signal);
  assert.deepEqual(d2.action, { name: 'read_file', path: 'extracts/table-1.json' });
  input.history.push({ thought: d2.thought, action: d2.action, extracted: fs.readFileSync(path.join(disk, 'extracts/table-1.json'), 'utf8') });
  const d3 = await model.decide(input, signal);
  const csv = (d3.action as { content: string }).content.split('\n');
  assert.deepEqual([csv[0], csv[1], csv[300], csv.length], ['n,word', '0,lamp', '299,lamp', 302]);
  assert.equal((await model.decide(input, signal)).action.name, 'done');
});

/** The builtin's intents that produce another action than their own name. */
const INTENT_ACTION: Record<string, ActionName> = { click_nth: 'click', search: 'type', write: 'write_file', save: 'write_file', answer: 'done', tab: 'switch_tab' };

test('when an action of the table gives example instructions, then each parses to that action and its verb begins a clause', () => {
  let checked = 0;
  for (const [name, spec] of Object.entries(SPECS)) {
    for (const example of spec.builtin?.examples ?? []) {
      const clause = example.replace('<url>', 'https://example.com/a');
      const intents = parseClause(clause);
      assert.ok(intents, `${name}: "${example}" does not parse`);
      const kind = intents.at(-1)!.kind;
      assert.equal(INTENT_ACTION[kind] ?? kind, name, `"${example}" parses to ${kind}, not ${name}`);
      assert.equal(splitClauses(`open https://example.com/b and ${clause}`).length, 2, `"${example}" does not begin a clause`);
      checked++;
    }
  }
  assert.ok(checked >= Object.keys(SPECS).length, 'every action has an example');
});

test('when a task scrolls a panel, drags one item onto another, sets a date field or presses a combination, then each becomes its intent', () => {
  const intents = (t: string) => parseTask(t).map((i) => i.intent);
  assert.deepEqual(
    intents(
      [
        "Scroll the panel 'Name'",
        "Scroll the panel 'Name' up",
        "Scroll down the feed 'Messages'",
        "Scroll to the bottom of the 'Chat' panel",
        "Scroll 'Results' to the top",
        "Drag 'A' onto 'B'",
        "Move 'Write tests' above 'Fix bug'",
        "Drag 'Volume' 60 px right",
        "Drag the 'Card' by 30 pixels down",
        'Set the date field to 2025-03-14',
        "Set 'Max price' to 450",
        'Press Control+A',
        'Press Shift + Tab',
        'Press Cmd+C',
      ].join('\n'),
    ),
    [
      { kind: 'scroll', direction: 'down', target: 'Name' },
      { kind: 'scroll', direction: 'up', target: 'Name' },
      { kind: 'scroll', direction: 'down', target: 'Messages' },
      { kind: 'scroll', direction: 'bottom', target: 'Chat' },
      { kind: 'scroll', direction: 'top', target: 'Results' },
      { kind: 'drag', target: 'A', onto: 'B' },
      { kind: 'drag', target: 'Write tests', onto: 'Fix bug' },
      { kind: 'drag', target: 'Volume', dx: 60 },
      { kind: 'drag', target: 'Card', dy: 30 },
      { kind: 'type', value: '2025-03-14', target: 'date', submit: false },
      { kind: 'type', value: '450', target: 'Max price', submit: false },
      { kind: 'press', key: 'Control+A' },
      { kind: 'press', key: 'Shift+Tab' },
      { kind: 'press', key: 'Cmd+C' },
    ],
  );
  assert.deepEqual(splitInstructions("Open example.com, set the date field to 2025-03-14 and drag 'A' onto 'B'"), ['Open example.com', 'set the date field to 2025-03-14', "drag 'A' onto 'B'"]);
});

test('when the builtin scrolls a panel, drags and sets a field by its kind, then it picks the scroll container, the draggable items and the date input of the page', async () => {
  const model = new BuiltinModel("Scroll down the panel 'Messages'. Drag 'Write tests' onto 'Fix bug'. Set the date field to 2025-03-14. Click 'Messages'");
  const elements = [
    el(1, { tag: 'section', type: '', label: 'Messages', role: 'scrollable', scroll: { above: 0, below: 900 }, container: true }),
    el(2, { tag: 'li', type: '', text: 'Fix bug' }),
    el(3, { tag: 'li', type: '', text: 'Write tests' }),
    el(4, { type: 'date', label: 'Departure' }),
    el(5, { tag: 'button', type: 'button', text: 'Messages' }),
  ];
  const input: DecideInput = { task: '', toolset: 'browser', turns: [], observation: { url: 'http://t/', title: '', text: '', tabs: [], elements }, history: [], diskFiles: [] };
  const signal = new AbortController().signal;
  assert.deepEqual((await model.decide(input, signal)).action, { name: 'scroll', direction: 'down', index: 1 });
  assert.deepEqual((await model.decide(input, signal)).action, { name: 'drag', index: 3, to: 2 });
  assert.deepEqual((await model.decide(input, signal)).action, { name: 'type', index: 4, text: '2025-03-14', submit: false });
  assert.deepEqual((await model.decide(input, signal)).action, { name: 'click', index: 5 }, 'a box listed because it scrolls is no click target');
});
