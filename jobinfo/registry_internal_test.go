package jobinfo

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/migrations"
)

// changeBeforeRegister is a real database handle that changes the kind's registered key just before
// Register writes its row, as another process could between Check and the write.
type changeBeforeRegister struct {
	DB
	t *testing.T
}

func (c changeBeforeRegister) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if sql == registerSQL {
		if _, err := c.DB.Exec(ctx, `UPDATE jobpipe_kinds SET key_columns = '{event_id}' WHERE name = 'webhook_delivery'`); err != nil {
			c.t.Fatal(err)
		}
	}
	return c.DB.Exec(ctx, sql, args...)
}

func TestRegisterRefusesRowChangedAfterCheck(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	ctx := context.Background()
	if err := migrations.Up(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	kind := MustDefine[delivery]("webhook_delivery")
	ddl, err := kind.TableSpec().CreateSQL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	err = kind.Register(ctx, changeBeforeRegister{s.Pool, t})
	want := `jobinfo: table "webhook_delivery" does not match kind "webhook_delivery" (1 problems):
  - kind "webhook_delivery" is registered in jobpipe_kinds with unique_columns {event_id} and key_columns {event_id}, but delivery gives {event_id} and {customer_id}: ` +
		`correct delivery's tags, or change the kind on purpose in a migration that changes its table's indexes and runs ` +
		`UPDATE jobpipe_kinds SET unique_columns = '{event_id}', key_columns = '{customer_id}' WHERE name = 'webhook_delivery'`
	var mismatch *MismatchError
	if !errors.As(err, &mismatch) || err.Error() != want {
		t.Errorf("Register =\n%v\nwant\n%s", err, want)
	}
	var key []string
	if err := s.Pool.QueryRow(ctx, `SELECT key_columns FROM jobpipe_kinds WHERE name = 'webhook_delivery'`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	if len(key) != 1 || key[0] != "event_id" {
		t.Errorf("key_columns after the refused Register = %v, want [event_id]", key)
	}
}
