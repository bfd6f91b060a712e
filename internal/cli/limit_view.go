package cli

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// What the limit commands print: the text for people and the JSON for scripts, both from the
// same state. The JSON field names are documented in docs/cli.md and kept stable.

// Where a per-key limit in force comes from: the JSON token and the words for the text.
var keyLimitSources = map[string]string{
	"key_paused":   "key paused",
	"key_override": "key override",
	"kind_default": "kind per-key default",
	"configured":   "configured",
	"default":      "jobpipe's default",
}

// kindKeySource is where the per-key limit of a key without its own comes from.
func kindKeySource(k limits.Kind) string {
	switch {
	case k.KeyLimit != nil:
		return "kind_default"
	case k.ConfiguredKeyLimit != nil:
		return "configured"
	}
	return "default" // the kind is not registered by a dispatcher yet: see limits.Kind.EffectiveKeyLimit
}

// keySource is where the limit in force for key comes from.
func keySource(k limits.Kind, key limits.Key) string {
	switch {
	case key.Paused:
		return "key_paused"
	case key.Limit != nil:
		return "key_override"
	}
	return kindKeySource(k)
}

// perKeyText is the kind's per-key limit and its source: "kind per-key default 10".
func perKeyText(k limits.Kind) string {
	return fmt.Sprintf("%s %d", keyLimitSources[kindKeySource(k)], k.EffectiveKeyLimit(limits.Key{}))
}

// keyLimitText is the named key's limit and its source, its pause aside: "key override 3".
func keyLimitText(st state) string {
	if st.key.Limit != nil {
		return fmt.Sprintf("key override %d", *st.key.Limit)
	}
	return perKeyText(st.kind)
}

// storedTotal is the stored total: "none" or the number.
func storedTotal(k limits.Kind) string {
	if k.MaxRunning == nil {
		return "none"
	}
	return strconv.Itoa(*k.MaxRunning)
}

// totalApplies says what total applies, its pause aside.
func totalApplies(k limits.Kind) string {
	if k.MaxRunning == nil {
		return "no total limit"
	}
	return fmt.Sprintf("total limit %d applies", *k.MaxRunning)
}

func pausedText(paused bool) string {
	if paused {
		return "paused"
	}
	return "not paused"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// quoteKey shows a key value in a sentence: quoted when it is one column's text, as it is when it
// is a JSON array already.
func quoteKey(k limits.Kind, value string) string {
	if len(k.KeyColumns) > 1 {
		return value
	}
	return strconv.Quote(value)
}

// showKey shows a key value in a table or after a label: as it is, unless spaces at its ends,
// control characters or emptiness would hide what it is.
func showKey(value string) string {
	if value == "" || strings.TrimSpace(value) != value || strings.ContainsFunc(value, unicode.IsControl) {
		return strconv.Quote(value)
	}
	return value
}

// shellSafe is what a shell passes through unquoted.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_.,:/@%+=-]+$`)

// shellArg quotes s for a POSIX shell, for commands printed to be copied.
func shellArg(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// resumeCommand is the command that undoes the pause of st's kind, or of its key when key is true.
func resumeCommand(st state, key bool) string {
	if key {
		return fmt.Sprintf("jobpipe resume %s --key %s", st.kind.Name, shellArg(st.key.Value))
	}
	return "jobpipe resume " + st.kind.Name
}

// lowered reports whether the limit in force went down; limits.Unlimited is above every number.
func lowered(was, now int) bool {
	if was == limits.Unlimited {
		return now != limits.Unlimited
	}
	return now != limits.Unlimited && now < was
}

// runningNote is the note for a limit in force that went down to now: running jobs go on. of names
// the jobs, more counts them ("5 or more" + more + " run"), resume is set when a pause halts them.
func runningNote(of, more string, now int, resume string) string {
	const prefix = "running jobs are not stopped: they finish; "
	switch {
	case resume != "":
		return fmt.Sprintf("%sno new job of %s starts until %q", prefix, of, resume)
	case now == 0:
		return fmt.Sprintf("%sno new job of %s starts while the limit is 0", prefix, of)
	}
	return fmt.Sprintf("%sno new job of %s starts while %d or more%s run", prefix, of, now, more)
}

// changeNotes are what a person changing limits should know beyond the change itself: running jobs
// go on under a lower limit, a pause still halts what was changed, overrides win over a default.
func changeNotes(was, now state) []string {
	notes := []string{}
	k := now.kind
	// A pause gets the note even where the limit was 0 already: jobs may still be running.
	if wasN, nowN := was.kind.EffectiveMaxRunning(), k.EffectiveMaxRunning(); lowered(wasN, nowN) || (k.Paused && !was.kind.Paused) {
		resume := ""
		if k.Paused {
			resume = resumeCommand(now, false)
		}
		notes = append(notes, runningNote(k.Name, "", nowN, resume))
	}
	if len(k.KeyColumns) > 0 {
		wasN, nowN := was.kind.EffectiveKeyLimit(limits.Key{}), k.EffectiveKeyLimit(limits.Key{})
		if lowered(wasN, nowN) {
			notes = append(notes, runningNote("a key without a limit of its own", " of that key", nowN, ""))
		}
		if wasN != nowN && now.keysWithLimit > 0 {
			have := "1 key has"
			if now.keysWithLimit > 1 {
				have = fmt.Sprintf("%d keys have", now.keysWithLimit)
			}
			notes = append(notes, fmt.Sprintf("%s a limit of their own, which wins over the per-key default: jobpipe limit list %s", have, k.Name))
		}
	}
	if now.key != nil {
		wasN, nowN := was.kind.EffectiveKeyLimit(*was.key), k.EffectiveKeyLimit(*now.key)
		if lowered(wasN, nowN) || (now.key.Paused && !was.key.Paused) {
			resume := ""
			if now.key.Paused {
				resume = resumeCommand(now, true)
			}
			notes = append(notes, runningNote("key "+quoteKey(k, now.key.Value), " of it", nowN, resume))
		}
		if was.key.Paused && now.key.Paused {
			notes = append(notes, fmt.Sprintf("key %s is paused: no job of it starts until %q", quoteKey(k, now.key.Value), resumeCommand(now, true)))
		}
	}
	if was.kind.Paused && k.Paused {
		notes = append(notes, fmt.Sprintf("%s is paused: no job of it starts until %q", k.Name, resumeCommand(now, false)))
	}
	return notes
}

// kindJSON is a kind's limits in the JSON output; see docs/cli.md.
type kindJSON struct {
	Kind                    string     `json:"kind"`
	KeyColumns              []string   `json:"key_columns"`
	Paused                  bool       `json:"paused"`
	MaxRunning              *int       `json:"max_running"`
	KeyLimit                *int       `json:"key_limit"`
	ConfiguredKeyLimit      *int       `json:"configured_key_limit"`
	EffectiveMaxRunning     *int       `json:"effective_max_running"`
	EffectiveKeyLimit       *int       `json:"effective_key_limit"`
	EffectiveKeyLimitSource *string    `json:"effective_key_limit_source"`
	UpdatedAt               *time.Time `json:"updated_at"`
}

// keyJSON is one key value's limit in the JSON output.
type keyJSON struct {
	Kind                 string     `json:"kind"`
	Key                  string     `json:"key"`
	Paused               bool       `json:"paused"`
	Limit                *int       `json:"limit"`
	EffectiveLimit       int        `json:"effective_limit"`
	EffectiveLimitSource string     `json:"effective_limit_source"`
	UpdatedAt            *time.Time `json:"updated_at"`
}

// stateJSON is a state: the kind, and the key when one was named.
type stateJSON struct {
	Kind kindJSON `json:"kind"`
	Key  *keyJSON `json:"key"`
}

// getJSON is what "limit get --json" prints.
type getJSON struct {
	stateJSON
	StoredKeys    int `json:"stored_keys"`
	KeysWithLimit int `json:"keys_with_limit"`
}

// changeJSON is what set, clear, pause and resume print with --json.
type changeJSON struct {
	Message string    `json:"message"`
	Notes   []string  `json:"notes"`
	Before  stateJSON `json:"before"`
	After   stateJSON `json:"after"`
}

func (st state) json() stateJSON {
	out := stateJSON{Kind: newKindJSON(st.kind)}
	if st.key != nil {
		k := newKeyJSON(st.kind, *st.key)
		out.Key = &k
	}
	return out
}

func newKindJSON(k limits.Kind) kindJSON {
	out := kindJSON{Kind: k.Name, KeyColumns: k.KeyColumns, Paused: k.Paused, MaxRunning: k.MaxRunning,
		KeyLimit: k.KeyLimit, ConfiguredKeyLimit: k.ConfiguredKeyLimit, UpdatedAt: timeOrNil(k.UpdatedAt)}
	if out.KeyColumns == nil {
		out.KeyColumns = []string{}
	}
	if n := k.EffectiveMaxRunning(); n != limits.Unlimited {
		out.EffectiveMaxRunning = &n
	}
	if len(k.KeyColumns) > 0 {
		n, source := k.EffectiveKeyLimit(limits.Key{}), kindKeySource(k)
		out.EffectiveKeyLimit, out.EffectiveKeyLimitSource = &n, &source
	}
	return out
}

func newKeyJSON(k limits.Kind, key limits.Key) keyJSON {
	return keyJSON{Kind: key.Kind, Key: key.Value, Paused: key.Paused, Limit: key.Limit,
		EffectiveLimit: k.EffectiveKeyLimit(key), EffectiveLimitSource: keySource(k, key), UpdatedAt: timeOrNil(key.UpdatedAt)}
}

// listJSON is what "limit list --json" prints: {"kinds": [...], "keys": [...]}.
func listJSON(kinds []limits.Kind, keys []limits.Key) any {
	byName := map[string]limits.Kind{}
	out := struct {
		Kinds []kindJSON `json:"kinds"`
		Keys  []keyJSON  `json:"keys"`
	}{Kinds: []kindJSON{}, Keys: []keyJSON{}}
	for _, k := range kinds {
		byName[k.Name] = k
		out.Kinds = append(out.Kinds, newKindJSON(k))
	}
	for _, key := range keys {
		out.Keys = append(out.Keys, newKeyJSON(byName[key.Kind], key))
	}
	return out
}

// timeOrNil is t in UTC, or nil for the zero time: nothing stored.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func writeJSON(e *env, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.Stdout, "%s\n", b)
	return err
}

// updatedText is when something was last stored, or that nothing is.
func updatedText(t time.Time) string {
	if t.IsZero() {
		return "nothing stored"
	}
	return t.UTC().Format(time.DateTime) + " UTC"
}

// writeState prints "limit get": one labelled line per fact, what is in force first and what is
// stored under it.
func writeState(e *env, st state) error {
	k := st.kind
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	line := func(label, value string) { fmt.Fprintf(tw, "%s:\t%s\n", label, value) }
	line("kind", k.Name)
	if st.key != nil {
		line("key", showKey(st.key.Value))
		line("kind paused", yesNo(k.Paused))
		line("key paused", yesNo(st.key.Paused))
	} else {
		cols := "none (no per-key limits)"
		if len(k.KeyColumns) > 0 {
			cols = strings.Join(k.KeyColumns, ", ")
		}
		line("key columns", cols)
		line("paused", yesNo(k.Paused))
	}
	line("total limit", totalInForce(k))
	line("  stored", storedTotal(k))
	switch {
	case st.key != nil:
		key := *st.key
		line("key limit", fmt.Sprintf("%d (%s)", k.EffectiveKeyLimit(key), keyLimitSources[keySource(k, key)]))
		line("  stored", intOr(key.Limit, "none"))
		line("  otherwise", fmt.Sprintf("%d (%s)", k.EffectiveKeyLimit(limits.Key{}), keyLimitSources[kindKeySource(k)]))
		line("updated", updatedText(key.UpdatedAt))
		return tw.Flush()
	case len(k.KeyColumns) > 0:
		line("per-key limit", fmt.Sprintf("%d (%s)", k.EffectiveKeyLimit(limits.Key{}), keyLimitSources[kindKeySource(k)]))
		line("  stored", intOr(k.KeyLimit, "none"))
		line("  configured", intOr(k.ConfiguredKeyLimit, fmt.Sprintf(
			"not recorded yet: a dispatcher records it when it starts with the kind (jobpipe's default is %d)", jobinfo.DefaultKeyLimit)))
		line("keys stored", fmt.Sprintf("%d with a limit of their own, %d in all (jobpipe limit list %s)", st.keysWithLimit, st.storedKeys, k.Name))
	}
	line("updated", updatedText(k.UpdatedAt))
	return tw.Flush()
}

// totalInForce is the total in force: a number, "none", or 0 with why.
func totalInForce(k limits.Kind) string {
	switch n := k.EffectiveMaxRunning(); {
	case k.Paused:
		return "0 (paused)"
	case n == limits.Unlimited:
		return "none"
	case n == 0:
		return "0 (halted)"
	default:
		return strconv.Itoa(n)
	}
}

func intOr(p *int, none string) string {
	if p == nil {
		return none
	}
	return strconv.Itoa(*p)
}

// writeList prints "limit list": the kinds, then the keys with something stored.
func writeList(e *env, kinds []limits.Kind, keys []limits.Key) error {
	if len(kinds) == 0 {
		_, err := fmt.Fprintln(e.Stdout, "no kind is registered: a kind is registered when a dispatcher starts with it "+
			"or when the migration that creates its table (jobpipe kind new) is applied")
		return err
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	byName := map[string]limits.Kind{}
	fmt.Fprintln(tw, "KIND\tPAUSED\tTOTAL\tSTORED\tPER KEY\tSTORED\tKEY COLUMNS")
	for _, k := range kinds {
		byName[k.Name] = k
		perKey, stored, cols := "-", "-", "-"
		if len(k.KeyColumns) > 0 {
			perKey = fmt.Sprintf("%d (%s)", k.EffectiveKeyLimit(limits.Key{}), keyLimitSources[kindKeySource(k)])
			stored = intOr(k.KeyLimit, "-")
			cols = strings.Join(k.KeyColumns, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, yesNo(k.Paused), totalInForce(k), intOr(k.MaxRunning, "-"), perKey, stored, cols)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(keys) == 0 {
		_, err := fmt.Fprintln(e.Stdout, "\nno key has a limit of its own or is paused")
		return err
	}
	fmt.Fprintln(e.Stdout)
	fmt.Fprintln(tw, "KIND\tKEY\tPAUSED\tLIMIT\tSTORED")
	for _, key := range keys {
		k := byName[key.Kind]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d (%s)\t%s\n", key.Kind, showKey(key.Value), yesNo(key.Paused),
			k.EffectiveKeyLimit(key), keyLimitSources[keySource(k, key)], intOr(key.Limit, "-"))
	}
	return tw.Flush()
}
