package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run measured and checked.
type Report struct {
	// Scenario is the scenario's name.
	Scenario string
	// Started is when the run started.
	Started time.Time
	// Settings are the options the run used, for the record.
	Settings []Pair
	// Result is the RESULT line's pairs, in order.
	Result []Pair
	// Tables are the human tables, printed in order.
	Tables []Table
	// Failures say what the accounting found wrong; a run with any failed.
	Failures []string
	// Details holds what the JSON report adds to the tables (per-statement timings, EXPLAIN...).
	Details map[string]any
	// Explain is EXPLAIN (ANALYZE, BUFFERS) output, printed with --explain.
	Explain string
}

// Pair is one key=value of the RESULT line or the settings.
type Pair struct {
	Key   string
	Value any
}

// Table is one human table: a title, a header and rows of cells.
type Table struct {
	Title  string     `json:"title"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
}

func newReport(scenario string) *Report {
	return &Report{Scenario: scenario, Started: time.Now(), Details: map[string]any{}}
}

// Failed reports whether the accounting found a problem.
func (r *Report) Failed() bool { return len(r.Failures) > 0 }

func (r *Report) fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

func (r *Report) result(key string, value any) { r.Result = append(r.Result, Pair{key, value}) }

func (r *Report) setting(key string, value any) { r.Settings = append(r.Settings, Pair{key, value}) }

func (r *Report) table(t Table) { r.Tables = append(r.Tables, t) }

// ResultLine is the one-line summary: "RESULT scenario=drain jobs=... verified=true".
func (r *Report) ResultLine() string {
	var b strings.Builder
	b.WriteString("RESULT")
	for _, p := range r.Result {
		fmt.Fprintf(&b, " %s=%s", p.Key, strings.ReplaceAll(format(p.Value), " ", "_"))
	}
	return b.String()
}

// Print writes the tables, the failures and, last, the RESULT line.
func (r *Report) Print(w io.Writer, explain bool) {
	for _, t := range r.Tables {
		fmt.Fprintf(w, "\n%s\n", t.Title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  "+strings.Join(t.Header, "\t"))
		for _, row := range t.Rows {
			fmt.Fprintln(tw, "  "+strings.Join(row, "\t"))
		}
		tw.Flush()
	}
	if explain && r.Explain != "" {
		fmt.Fprintf(w, "\n%s\n", r.Explain)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
	fmt.Fprintln(w, r.ResultLine())
}

// WriteJSON writes the whole report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	obj := struct {
		Scenario string         `json:"scenario"`
		Started  time.Time      `json:"started"`
		Settings pairs          `json:"settings"`
		Result   pairs          `json:"result"`
		Line     string         `json:"result_line"`
		Failures []string       `json:"failures"`
		Tables   []Table        `json:"tables"`
		Explain  string         `json:"explain,omitempty"`
		Details  map[string]any `json:"details"`
	}{r.Scenario, r.Started, r.Settings, r.Result, r.ResultLine(), r.Failures, r.Tables, r.Explain, r.Details}
	if obj.Failures == nil {
		obj.Failures = []string{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(obj)
}

// pairs marshals as a JSON object that keeps its order.
type pairs []Pair

func (ps pairs) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(p.Key)
		v, err := json.Marshal(p.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// format writes a value for the RESULT line and the tables: floats without exponent, lists with commas.
func format(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case time.Duration:
		return strconv.FormatFloat(round(x.Seconds(), 3), 'f', -1, 64)
	case []int:
		s := make([]string, len(x))
		for i, n := range x {
			s[i] = strconv.Itoa(n)
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprint(v)
}

// round rounds x to the given number of decimals.
func round(x float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(x*p) / p
}

// rate is n per second over d, rounded to a whole number.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Round(float64(n) / d.Seconds())
}

// ms is d in milliseconds with two decimals.
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 2) }
