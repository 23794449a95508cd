import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addFilesBody, createRunBody, listRunsQuery, stepsQuery, type JsonSchema } from './schemas.js';
import { RequestValidationError, coerceQuery, validate, type ValidationIssue } from './validation.js';

function issues(schema: JsonSchema, data: unknown, where: 'body' | 'query' = 'body'): ValidationIssue[] {
  try {
    validate(schema, data, where);
  } catch (err) {
    assert.ok(err instanceof RequestValidationError);
    return err.issues;
  }
  assert.fail('expected a validation error');
}

test('when a run body has top-level browser_profile_id, then it is extra_forbidden at its location', () => {
  assert.deepEqual(issues(createRunBody, { task: 't', browser_profile_id: 'prf_1' }), [
    { type: 'extra_forbidden', loc: ['body', 'browser_profile_id'], msg: 'Extra inputs are not permitted', input: 'prf_1' },
  ]);
});

test('when an unknown field is nested, then its full path is reported', () => {
  const [i] = issues(createRunBody, { task: 't', browser: { profile_id: 'p', colour: 'red' } });
  assert.deepEqual(i, { type: 'extra_forbidden', loc: ['body', 'browser', 'colour'], msg: 'Extra inputs are not permitted', input: 'red' });
  const [j] = issues(addFilesBody, { files: [{ name: 'a.txt' }, { name: 'b', size: 3 }] });
  assert.deepEqual(j!.loc, ['body', 'files', 1, 'size']);
});

test('when task is missing and a width has the wrong type, then both are reported FastAPI-style', () => {
  const got = issues(createRunBody, { browser: { screen_width: 'wide', screen_height: 600 } });
  assert.deepEqual(got, [
    { type: 'missing', loc: ['body', 'task'], msg: 'Field required', input: { browser: { screen_width: 'wide', screen_height: 600 } } },
    { type: 'int_type', loc: ['body', 'browser', 'screen_width'], msg: 'Input should be a valid integer', input: 'wide' },
  ]);
});

test('when a screen width comes without a height or out of range, then each is a clear error', () => {
  const [dep] = issues(createRunBody, { task: 't', browser: { screen_width: 800 } });
  assert.equal(dep!.type, 'value_error');
  assert.match(dep!.msg, /screen_width and screen_height must be given together/);
  const [range] = issues(createRunBody, { task: 't', browser: { screen_width: 5000, screen_height: 600 } });
  assert.deepEqual(range, { type: 'less_than_equal', loc: ['body', 'browser', 'screen_width'], msg: 'Input should be less than or equal to 3840', input: 5000, ctx: { le: 3840 } });
});

test('when strings are empty, lists too long or names unsafe, then the pydantic message is given', () => {
  assert.equal(issues(createRunBody, { task: '' })[0]!.msg, 'String should have at least 1 character');
  assert.equal(issues(addFilesBody, { files: [] })[0]!.msg, 'List should have at least 1 item after validation, not 0');
  for (const name of ['..', 'a/b', 'a\\b', 'nul\u0000']) {
    const [i] = issues(addFilesBody, { files: [{ name }] });
    assert.equal(i!.type, 'value_error', name);
  }
  assert.equal(issues(createRunBody, 'just a string')[0]!.type, 'model_attributes_type');
});

test('when query strings are given, then numbers are parsed before validation and bad ones reported', () => {
  assert.deepEqual(validate(listRunsQuery, coerceQuery(listRunsQuery, { limit: '5', status: 'queued', other: 'x' }), 'query'), { limit: 5, status: 'queued' });
  const [i] = issues(listRunsQuery, coerceQuery(listRunsQuery, { limit: 'ten' }), 'query');
  assert.deepEqual(i!.loc, ['query', 'limit']);
  assert.equal(i!.type, 'int_type');
  assert.equal(issues(listRunsQuery, { status: 'done' }, 'query')[0]!.msg, "Input should be 'queued', 'running', 'completed', 'stopped' or 'failed'");
});

test('when after is beyond what the services count in (2^31), then it is a 422, not a 500', () => {
  const [i] = issues(stepsQuery, coerceQuery(stepsQuery, { after: String(2 ** 31) }), 'query');
  assert.deepEqual(i!.loc, ['query', 'after']);
  assert.equal(i!.type, 'less_than_equal');
  assert.deepEqual(validate(stepsQuery, coerceQuery(stepsQuery, { after: String(2 ** 31 - 1) }), 'query'), { after: 2 ** 31 - 1 });
});

test('when any string holds a NUL, then it is refused where it is, whatever its schema', () => {
  assert.deepEqual(issues(createRunBody, { task: 'ok', browser: { profile_id: 'prf_\u0000' }, attached_file_ids: ['file_1', '\u0000'] }).map((i) => [i.type, i.loc]), [
    ['string_pattern_mismatch', ['body', 'browser', 'profile_id']],
    ['string_pattern_mismatch', ['body', 'attached_file_ids', 1]],
  ]);
});

test('when a value nests deeper than 32 levels, then one issue without the value', () => {
  let deep: unknown = 'x';
  for (let i = 0; i < 100000; i++) deep = [deep];
  assert.deepEqual(issues(createRunBody, { task: deep }), [{ type: 'value_error', loc: ['body'], msg: 'Value error, nested deeper than 32 levels', input: null }]);
});
