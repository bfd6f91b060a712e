package limits

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// Get returns what is stored for the kind, with its key columns and configured per-key limit.
func Get(ctx context.Context, db jobinfo.DB, kind string) (Kind, error) {
	kinds, err := listKinds(ctx, db, "WHERE k.name = $1", kind)
	if err != nil {
		return Kind{}, err
	}
	if len(kinds) == 0 {
		return Kind{}, unknownKind(kind)
	}
	return kinds[0], nil
}

// GetKey returns what is stored for one key value of the kind; nothing stored gives a Key with only
// Kind and Value set. Value is the key as NormalizeKey writes it.
func GetKey(ctx context.Context, db jobinfo.DB, kind, key string) (Key, error) {
	cols, err := keyColumns(ctx, db, kind)
	if err != nil {
		return Key{}, err
	}
	value, err := normalizeKey(kind, cols, key)
	if err != nil {
		return Key{}, err
	}
	keys, err := listKeys(ctx, db, "WHERE kind = $1 AND key_value = $2", kind, value)
	if err != nil || len(keys) == 0 {
		return Key{Kind: kind, Value: value}, err
	}
	return keys[0], nil
}

// List returns the limits of one kind or (kind "") of every registered kind, ordered by name, and
// every stored key override of them, ordered by kind and key.
func List(ctx context.Context, db jobinfo.DB, kind string) ([]Kind, []Key, error) {
	kindWhere, keyWhere, args := "", "", []any{}
	if kind != "" {
		kindWhere, keyWhere, args = "WHERE k.name = $1", "WHERE kind = $1", []any{kind}
	}
	kinds, err := listKinds(ctx, db, kindWhere, args...)
	if err != nil {
		return nil, nil, err
	}
	if kind != "" && len(kinds) == 0 {
		return nil, nil, unknownKind(kind)
	}
	keys, err := listKeys(ctx, db, keyWhere, args...)
	if err != nil {
		return nil, nil, err
	}
	return kinds, keys, nil
}

func listKinds(ctx context.Context, db jobinfo.DB, where string, args ...any) ([]Kind, error) {
	rows, err := db.Query(ctx, listKindsSQL+where+listKindsOrder, args...)
	if err != nil {
		return nil, fmt.Errorf("limits: reading kind limits: %w", err)
	}
	kinds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Kind, error) {
		var k Kind
		var updated *time.Time // NULL when nothing is stored
		err := r.Scan(&k.Name, &k.KeyColumns, &k.MaxRunning, &k.KeyLimit, &k.Paused, &updated, &k.ConfiguredKeyLimit)
		if updated != nil {
			k.UpdatedAt = *updated
		}
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("limits: reading kind limits: %w", err)
	}
	return kinds, nil
}

func listKeys(ctx context.Context, db jobinfo.DB, where string, args ...any) ([]Key, error) {
	rows, err := db.Query(ctx, listKeysSQL+where+listKeysOrder, args...)
	if err != nil {
		return nil, fmt.Errorf("limits: reading key limits: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) {
		var k Key
		err := r.Scan(&k.Kind, &k.Value, &k.Limit, &k.Paused, &k.UpdatedAt)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("limits: reading key limits: %w", err)
	}
	return keys, nil
}
