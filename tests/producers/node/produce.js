// A producer with no Python on its side: enqueues django-dbqueue jobs through
// Node's mysql2 driver as docs/sql-contract.md says (a plain INSERT, and the
// dbqueue_enqueue() procedure), waits for their outcomes with plain SELECTs,
// and prints them as one JSON document. tests/test_sql_producers.py runs it.
//
//   DBQUEUE_DB_HOST, DBQUEUE_DB_PORT, DBQUEUE_DB_USER, DBQUEUE_DB_PASSWORD, DBQUEUE_DB_NAME

'use strict';

const mysql = require('mysql2/promise');

const FINAL = new Set(['SUCCESSFUL', 'FAILED', 'CANCELLED']);

async function insert(db, taskPath, args, kwargs, queue) {
  // run_after as a JS Date: with timezone 'Z' the driver writes it in UTC,
  // which is what the contract's datetime columns hold.
  const [result] = await db.execute(
    'INSERT INTO django_dbqueue_job (task_path, args, kwargs, queue_name, run_after) VALUES (?, ?, ?, ?, ?)',
    [taskPath, JSON.stringify(args), JSON.stringify(kwargs), queue, new Date()],
  );
  return result.insertId;
}

async function call(db, taskPath, args, kwargs, queue, priority) {
  await db.execute('CALL dbqueue_enqueue(?, ?, ?, ?, ?, NULL, NULL, @job_id)', [
    taskPath,
    JSON.stringify(args),
    JSON.stringify(kwargs),
    queue,
    priority,
  ]);
  const [rows] = await db.query('SELECT @job_id AS id');
  return Number(rows[0].id);
}

async function waitFor(db, ids, seconds) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const [rows] = await db.query(
      // As text: mysql2 parses columns MariaDB marks as JSON by itself, and a
      // returned string would then be indistinguishable from JSON text.
      'SELECT id, status, CAST(return_value AS CHAR) AS return_value, CAST(errors AS CHAR) AS errors ' +
        'FROM django_dbqueue_job WHERE id IN (?)',
      [ids],
    );
    if (rows.length === ids.length && rows.every((row) => FINAL.has(row.status))) {
      return new Map(rows.map((row) => [Number(row.id), row]));
    }
    if (Date.now() > deadline) {
      throw new Error(`jobs not finished after ${seconds}s: ${JSON.stringify(rows)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function outcome(row) {
  const errors = JSON.parse(row.errors);
  const last = errors[errors.length - 1];
  return {
    status: row.status,
    return_value: row.return_value === null ? null : JSON.parse(row.return_value),
    error: last ? last.exception_class_path : null,
    traceback_tail: last ? last.traceback.trim().split('\n').pop() : null,
  };
}

async function main() {
  const env = process.env;
  const db = await mysql.createConnection({
    host: env.DBQUEUE_DB_HOST || '127.0.0.1',
    port: Number(env.DBQUEUE_DB_PORT || 3306),
    user: env.DBQUEUE_DB_USER || 'root',
    password: env.DBQUEUE_DB_PASSWORD || '',
    database: env.DBQUEUE_DB_NAME,
    charset: 'utf8mb4',
    timezone: 'Z',
  });
  try {
    const ids = {
      inserted: await insert(db, 'demo.tasks.add', [20, 22], {}, 'default'),
      keywords: await insert(db, 'demo.tasks.add', [], { a: 1, b: 2 }, 'default'),
      unicode: await insert(db, 'demo.tasks.record', ['node: Grüße ✓'], {}, 'default'),
      called: await call(db, 'demo.tasks.send_welcome', [7], {}, 'email', 10),
      unknown_task: await insert(db, 'demo.nothing_here.task', [], {}, 'default'),
      wrong_arity: await call(db, 'demo.tasks.add', [1, 2, 3], {}, null, null),
    };
    const refused = {};
    try {
      await call(db, 'demo.tasks.add', [1, 2], {}, 'nope', null);
    } catch (error) {
      refused.queue = { sqlState: error.sqlState, errno: error.errno, message: error.message };
    }
    const rows = await waitFor(db, Object.values(ids), 60);
    const jobs = {};
    for (const [name, id] of Object.entries(ids)) {
      jobs[name] = { id, ...outcome(rows.get(id)) };
    }
    process.stdout.write(JSON.stringify({ jobs, refused }) + '\n');
  } finally {
    await db.end();
  }
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
