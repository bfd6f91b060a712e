package migrations

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// maxNameLen bounds a migration name, so file names stay readable and well within file system limits.
const maxNameLen = 100

var validName = regexp.MustCompile(`^[a-z0-9_]+$`)

// skeleton is a new migration: the two sections goose needs, empty.
const skeleton = `-- +goose Up


-- +goose Down

`

// Create writes a new, empty goose SQL migration, DIR/<version>_<name>.sql, and returns its path.
// The version is now in UTC as YYYYMMDDhhmmss, goose's timestamp versions. dir is created if
// missing.
//
// name must be 1 to 100 characters of a-z, 0-9 and _. Create never overwrites: it fails if the
// file, or any migration with the same version, already exists.
func Create(dir, name string, now time.Time) (string, error) {
	return Write(dir, name, now, skeleton)
}

// Write is [Create] with the file's content given, for tools that generate a migration (such as
// "jobpipe kind new"). content must be a goose SQL migration with -- +goose Up and Down sections.
func Write(dir, name string, now time.Time, content string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if dir == "" {
		return "", errors.New("migrations: create: no directory given; pass the directory that holds your migrations")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("migrations: create: making the migration directory: %w", err)
	}
	version := now.UTC().Format("20060102150405")
	// goose refuses two files with one version, so a name that differs does not make it safe.
	same, err := filepath.Glob(filepath.Join(dir, version+"_*"))
	if err != nil {
		return "", fmt.Errorf("migrations: create: %w", err)
	}
	if len(same) > 0 {
		return "", fmt.Errorf("migrations: create: %s already has version %s; wait a second and create again", same[0], version)
	}
	path := filepath.Join(dir, version+"_"+name+".sql")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("migrations: create: %w", err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		os.Remove(path) // a half-written migration must not be applied by the next up
		return "", fmt.Errorf("migrations: create: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("migrations: create: writing %s: %w", path, err)
	}
	return path, nil
}

func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("migrations: create: the migration name is empty; name what it does, e.g. add_email_index")
	case len(name) > maxNameLen:
		return fmt.Errorf("migrations: create: the migration name is %d characters long; use at most %d", len(name), maxNameLen)
	case !validName.MatchString(name):
		return fmt.Errorf("migrations: create: the migration name %q may hold only a-z, 0-9 and _; e.g. add_email_index", name)
	}
	return nil
}
