package migrations

import (
	"cmp"
	"context"
	"path/filepath"
	"slices"
	"time"
)

// MigrationStatus is one migration's state.
type MigrationStatus struct {
	Source    string // SourceJobpipe or SourceApp
	Version   int64
	File      string    // the file's base name; empty for an applied version without a file
	Applied   bool      // recorded in the version table
	AppliedAt time.Time // when, as the database's clock recorded it; zero when pending
}

// SourceVersion is where one source of migrations stands.
type SourceVersion struct {
	Source  string // SourceJobpipe or SourceApp
	Table   string // its version table
	Current int64  // the highest applied version, 0 when none
	Latest  int64  // the highest version among its files, 0 when none
}

// Status lists every migration of jobpipe's and then of the application's directory, ascending by
// version within each, with whether it is applied. Versions applied but without a file are listed
// too (File empty), so status can show what an [*UnknownVersionError] is about.
//
// Status only reads: it neither creates a missing version table nor waits for a migration that is
// running, unlike goose's own Status.
func (r *Runner) Status(ctx context.Context) ([]MigrationStatus, error) {
	var out []MigrationStatus
	for _, s := range r.sources {
		applied, err := s.applied(ctx, r.db)
		if err != nil {
			return nil, err
		}
		var rows []MigrationStatus
		for _, f := range s.files {
			at, ok := applied[f.Version]
			rows = append(rows, MigrationStatus{
				Source: s.name, Version: f.Version, File: filepath.Base(f.Path), Applied: ok, AppliedAt: at,
			})
		}
		for _, v := range s.unknown(applied) {
			rows = append(rows, MigrationStatus{Source: s.name, Version: v, Applied: true, AppliedAt: applied[v]})
		}
		slices.SortStableFunc(rows, func(a, b MigrationStatus) int { return cmp.Compare(a.Version, b.Version) })
		out = append(out, rows...)
	}
	return out, nil
}

// Version reports the current and latest version of jobpipe's migrations and then of the
// application's directory. Like Status, it only reads.
func (r *Runner) Version(ctx context.Context) ([]SourceVersion, error) {
	out := make([]SourceVersion, 0, len(r.sources))
	for _, s := range r.sources {
		applied, err := s.applied(ctx, r.db)
		if err != nil {
			return nil, err
		}
		out = append(out, SourceVersion{Source: s.name, Table: s.table, Current: current(applied), Latest: s.latest()})
	}
	return out, nil
}
