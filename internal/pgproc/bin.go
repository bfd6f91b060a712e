package pgproc

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
)

// BinDirEnv names a directory holding initdb, postgres and pg_ctl to use instead of the ones found.
const BinDirEnv = "JOBPIPE_PG_BIN"

// serverPrograms are what a cluster needs.
var serverPrograms = []string{"initdb", "postgres", "pg_ctl"}

// BinDir finds the server's programs: $JOBPIPE_PG_BIN, else the newest
// /usr/lib/postgresql/<version>/bin (Debian's layout, where they are not on the PATH), else the
// directory initdb on the PATH resolves to. Its error says what to install.
func BinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		if missing := missingPrograms(d); len(missing) > 0 {
			return "", fmt.Errorf("pgproc: $%s=%s lacks %v", BinDirEnv, d, missing)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(initdb); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	for _, d := range dirs {
		if len(missingPrograms(d)) == 0 {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgproc: the PostgreSQL server's programs (%v) are not in /usr/lib/postgresql/<version>/bin "+
		"nor on the PATH: install the server (apt-get install postgresql), or name their directory in $%s", serverPrograms, BinDirEnv)
}

// missingPrograms lists the server programs that dir lacks.
func missingPrograms(dir string) []string {
	var missing []string
	for _, p := range serverPrograms {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	return missing
}

// serverCredential is who the server's programs run as: this process's user, unless that is root,
// which initdb and postgres refuse; then the postgres user that the server's package creates.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgproc: running as root, the server must run as the postgres user, which does not exist (%v): "+
			"install the server (apt-get install postgresql), which creates it", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgproc: the postgres user's uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgproc: the postgres user's gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
