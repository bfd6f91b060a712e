// Package migrationtest is test support: the list of jobpipe's migrations and the tables each
// creates, read from [migrations.FS], so tests' expectations follow the migration list as it grows.
package migrationtest

import (
	"cmp"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jobpipe/jobpipe/migrations"
)

// Migration is one of jobpipe's embedded migrations.
type Migration struct {
	Version int64    // the goose version: the file name's number before the first _
	File    string   // the file name, as goose reports it
	Tables  []string // the tables its Up section creates, in the order it creates them
}

var (
	upSection   = regexp.MustCompile(`(?s)-- \+goose Up\n(.*?)(?:-- \+goose Down|\z)`)
	sqlComment  = regexp.MustCompile(`--[^\n]*`)
	createTable = regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)
)

// Jobpipe returns jobpipe's migrations, read from [migrations.FS] (the file system goose reads them
// from) and ascending by version as goose applies them. It reads them once; callers share the
// result and must not modify it.
func Jobpipe() ([]Migration, error) { return load() }

var load = sync.OnceValues(func() ([]Migration, error) { return read(migrations.FS()) })

// read lists the goose SQL migrations at the root of fsys, ascending by version.
func read(fsys fs.FS) ([]Migration, error) {
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, file := range files {
		prefix, _, ok := strings.Cut(file, "_")
		version, err := strconv.ParseInt(prefix, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s: no goose version before the first _", file)
		}
		content, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, err
		}
		up := upSection.FindSubmatch(content)
		if up == nil {
			return nil, fmt.Errorf("%s: no -- +goose Up section", file)
		}
		m := Migration{Version: version, File: file}
		for _, c := range createTable.FindAllSubmatch(sqlComment.ReplaceAll(up[1], nil), -1) {
			m.Tables = append(m.Tables, string(c[1]))
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no *.sql migrations")
	}
	slices.SortFunc(out, func(a, b Migration) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}
