package migrations

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
// The version is now in UTC as YYYYMMDDhhmmss, goose's timestamp versions; when dir already holds a
// migration of that version or a later one (two created in one second), it is one past the highest
// version in dir instead, so that versions stay unique and in the order the migrations were created.
// dir is created if missing.
//
// name must be 1 to 100 characters of a-z, 0-9 and _. Create never overwrites an existing file.
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
	version, err := nextVersion(dir, now)
	if err != nil {
		return "", err
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

// versionPrefix is the version at the start of a goose migration's file name.
var versionPrefix = regexp.MustCompile(`^([0-9]+)_.*\.(sql|go)$`)

// nextVersion is now's timestamp version, or one past the highest version in dir when that is not
// lower: goose refuses two migrations with one version, and by default one older than a migration
// already applied.
func nextVersion(dir string, now time.Time) (string, error) {
	version, _ := strconv.ParseInt(now.UTC().Format("20060102150405"), 10, 64)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("migrations: create: reading the migration directory: %w", err)
	}
	for _, e := range entries {
		m := versionPrefix.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if v, err := strconv.ParseInt(m[1], 10, 64); err == nil && v >= version {
			version = v + 1
		}
	}
	return strconv.FormatInt(version, 10), nil
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
