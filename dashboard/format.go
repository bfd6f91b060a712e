package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// templateFuncs are the helpers the templates format with.
var templateFuncs = template.FuncMap{
	"kindURL":        kindURL,
	"jobURL":         jobURL,
	"actionURL":      actionURL,
	"duration":       formatDuration,
	"time":           formatTime,
	"timep":          formatTimePtr,
	"ago":            formatAgo,
	"maxRunning":     formatMaxRunning,
	"limit":          formatLimit,
	"str":            derefString,
	"num":            derefInt,
	"pretty":         prettyJSON,
	"truncate":       truncate,
	"when":           formatWhen,
	"join":           func(s []string) string { return strings.Join(s, ", ") },
	"pauseAction":    pauseAction,
	"pauseKeyAction": pauseKeyAction,
	"keyHint":        keyHint,
	"due":            isDue,
}

func kindURL(base, kind string) string { return base + "/kinds/" + url.PathEscape(kind) }

func jobURL(base, kind string, id int64) string {
	return kindURL(base, kind) + "/jobs/" + strconv.FormatInt(id, 10)
}

func actionURL(base, kind, action string) string { return kindURL(base, kind) + "/actions/" + action }

// formatDuration prints d to the second, in its two largest units: "3d 4h", "2m 5s", "0s".
func formatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d < 0 {
		d = -d
	}
	s := int64(d / time.Second)
	days, hours, mins, secs := s/86400, s%86400/3600, s%3600/60, s%60
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, hours)
	case hours > 0:
		return fmt.Sprintf("%dh %dm", hours, mins)
	case mins > 0:
		return fmt.Sprintf("%dm %ds", mins, secs)
	}
	return fmt.Sprintf("%ds", secs)
}

// formatAge is formatDuration with "-" for none.
func formatAge(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return formatDuration(d)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return formatTime(*t)
}

// formatAgo prints how far t (a time.Time or *time.Time) is from now: "5m 2s ago", "in 1h 0m".
func formatAgo(t any) string {
	var tt time.Time
	switch t := t.(type) {
	case time.Time:
		tt = t
	case *time.Time:
		if t != nil {
			tt = *t
		}
	}
	if tt.IsZero() {
		return "-"
	}
	d := time.Until(tt)
	if d > time.Second/2 {
		return "in " + formatDuration(d)
	}
	return formatDuration(-d) + " ago"
}

// formatWhen says what the job's next or last moment is: when it is due, started, or finished.
func formatWhen(j admin.Job) string {
	switch j.State {
	case jobinfo.StateProcessed:
		return "processed " + formatAgo(j.ProcessedAt)
	case jobinfo.StateFailed:
		return "failed " + formatAgo(j.FailedAt)
	case jobinfo.StateRunning:
		return "started " + formatAgo(j.StartedAt)
	}
	if j.ProcessAfter != nil && j.ProcessAfter.After(time.Now()) {
		return "due " + formatAgo(j.ProcessAfter)
	}
	return "due now"
}

func pauseAction(paused bool) string {
	if paused {
		return "resume"
	}
	return "pause"
}

func pauseKeyAction(paused bool) string {
	if paused {
		return "resume-key"
	}
	return "pause-key"
}

func formatMaxRunning(n int) string {
	if n == limits.Unlimited {
		return "∞"
	}
	return strconv.Itoa(n)
}

// formatLimit prints a stored limit: "none" when none is stored.
func formatLimit(n *int) string {
	if n == nil {
		return "none"
	}
	return strconv.Itoa(*n)
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}

func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// truncate shortens s to at most n runes, marking the cut.
func truncate(n int, s string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// keyHint is the placeholder of a key input: the column for a one-column key, the JSON array of the
// columns for a longer one.
func keyHint(cols []string) string {
	if len(cols) == 1 {
		return cols[0]
	}
	return "JSON array: [" + strings.Join(cols, ", ") + "]"
}

// isDue reports whether a waiting job may start now (as far as its schedule goes).
func isDue(j admin.Job) bool {
	return j.ProcessAfter == nil || !j.ProcessAfter.After(time.Now())
}
