// Package jobinfo owns the definition of a job kind: which Go struct carries its data, which table holds
// its rows, which columns make its unique key and its concurrency key, how its jobs are ordered, how
// often they are retried, and how long a handler may run (Timeout).
//
// A kind is defined once from a Go struct. Struct tags map fields to columns and name the unique fields:
//
//	type Delivery struct {
//		CustomerID int64           `jobpipe:"customer_id,key"`
//		EventID    string          `jobpipe:"event_id,unique"`
//		Payload    json.RawMessage `jobpipe:"payload"`
//	}
//
//	deliveries, err := jobinfo.Define[Delivery]("webhook_delivery", jobinfo.MaxAttempts(10))
//
// The tag is `jobpipe:"column[,unique][,key]"`; "-" skips a field, and an untagged exported field maps to
// the snake_case of its name. Unique fields make the until-executed unique key: two jobs with equal unique
// fields never both wait. Key fields make the concurrency key: jobs of one key start in the kind's order,
// and at most KeyLimit of them run at once (1 by default: unique while executing). Without key fields, the
// unique fields are also the concurrency key, unless NoKey is given.
//
// The same definition produces the table's DDL ([TableSpec.CreateSQL], also written as a goose migration
// by `jobpipe kind new`) and checks an existing table against the struct ([Kind.Check]), reporting every
// mismatch in one error. Table and column names reach SQL only through [pgx.Identifier] after validation.
//
// A kind's unique fields and key are recorded three times: in the struct's tags, in the table's indexes
// and in the kind's row in jobpipe_kinds. Check refuses any difference between them, and
// [Kind.Register] never rewrites the recorded ones: a kind's keys change on purpose, in a migration
// that changes the indexes and the jobpipe_kinds row together.
//
// Each kind's table carries the data columns and the pipeline columns described in [PipelineColumns].
// A row's state is derived from them (see [State]), never stored twice.
package jobinfo
