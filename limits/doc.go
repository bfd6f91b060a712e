// Package limits reads and changes the running limits of job kinds while dispatchers run: no deploy,
// no restart.
//
// Three limits apply to a kind, each stored in PostgreSQL (jobpipe's migrations create the tables):
//
//   - MaxRunning, the kind's total: at most this many of its jobs run at once across every dispatcher
//     and process ("a maintenance kind at most 3 at once"). Unset, there is no total beyond each
//     dispatcher's own Concurrency.
//   - KeyLimit, the kind's per-key default: at most this many jobs of one key value run at once ("at
//     most 10 webhooks per customer"). Unset, the kind's configured jobinfo.KeyLimit applies.
//   - A key override (SetKey): the limit of one key value, which wins over the kind's default in
//     either direction.
//
// A limit of 0 halts: no new job starts. Pause and PauseKey do the same while keeping the limit, so
// Resume restores it. Lowering a limit or pausing never stops a job that is already running: running
// jobs finish, and no new job starts above the new limit until enough of them have.
//
// Every change notifies channel jobpipe_limits (a trigger does it, so changes made with plain SQL
// count too); running dispatchers apply it at once, and within a second in any case.
//
// A key value is the text of the kind's key column as PostgreSQL prints it (42, acme, a UUID in
// lower case). For a key of several columns it is a JSON array of the values, ["acme", 42];
// SetKey and the others accept any spacing and store the form PostgreSQL's json_build_array prints.
package limits
