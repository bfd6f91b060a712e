package dashboard

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/jobpipe/jobpipe/admin"
)

// PollInterval is how often the overview page's script refreshes the counts.
const PollInterval = 2 * time.Second

// summaryRow is one kind's line of the overview, in the page and in /api/summary. Text holds each
// cell as the page shows it, so that the script that refreshes the page formats nothing itself.
type summaryRow struct {
	Kind                 string  `json:"kind"`
	Waiting              int64   `json:"waiting"`
	Due                  int64   `json:"due"`
	Running              int64   `json:"running"`
	Processed            int64   `json:"processed"`
	Failed               int64   `json:"failed"`
	MaxRunning           int     `json:"max_running"`
	Paused               bool    `json:"paused"`
	OldestWaitingSeconds float64 `json:"oldest_waiting_seconds"`
	ScheduleLagSeconds   float64 `json:"schedule_lag_seconds"`
	// LockWaits describes each dispatcher in which the kind waits for a quorum of Redis lock nodes
	// (admin.LockWait's String).
	LockWaits []string `json:"lock_waits"`
	// StatusClass is the status badge's class suffix: active, paused or lockwait.
	StatusClass string            `json:"status_class"`
	Text        map[string]string `json:"text"`
}

func newSummaryRow(s admin.Summary) summaryRow {
	status, class := "active", "active"
	waits := make([]string, len(s.LockWaits))
	for i, w := range s.LockWaits {
		waits[i] = w.String()
	}
	switch {
	case s.Paused:
		status, class = "paused", "paused"
	case len(waits) > 0:
		status, class = "waiting for Redis", "lockwait"
	}
	return summaryRow{
		Kind: s.Kind, Waiting: s.Waiting, Due: s.Due, Running: s.Running, Processed: s.Processed, Failed: s.Failed,
		MaxRunning: s.MaxRunning, Paused: s.Paused, LockWaits: waits, StatusClass: class,
		OldestWaitingSeconds: s.OldestWaiting.Seconds(), ScheduleLagSeconds: s.ScheduleLag.Seconds(),
		Text: map[string]string{
			"waiting":   itoa(s.Waiting),
			"due":       itoa(s.Due),
			"running":   itoa(s.Running) + " / " + formatMaxRunning(s.MaxRunning),
			"processed": itoa(s.Processed),
			"failed":    itoa(s.Failed),
			"oldest":    formatAge(s.OldestWaiting),
			"lag":       formatAge(s.ScheduleLag),
			"status":    status,
			"lock":      strings.Join(waits, "; "),
		},
	}
}

// summaryJSON is what /api/summary answers.
type summaryJSON struct {
	GeneratedAt    time.Time    `json:"generated_at"`
	PollIntervalMS int64        `json:"poll_interval_ms"`
	Kinds          []summaryRow `json:"kinds"`
	// Problems names the registered kinds that could not be read (a missing table), one line each;
	// the other kinds are shown all the same.
	Problems []string `json:"problems"`
}

func (h *Handler) summaries(r *request) (summaryJSON, error) {
	all, err := admin.SummarizeAll(r.Context(), h.cfg.DB)
	problems := []string{}
	switch {
	case errors.Is(err, admin.ErrTableMissing):
		problems = strings.Split(err.Error(), "\n") // errors.Join puts one per line
	case err != nil:
		return summaryJSON{}, err
	}
	out := summaryJSON{GeneratedAt: time.Now().UTC(), PollIntervalMS: PollInterval.Milliseconds(), Kinds: make([]summaryRow, len(all)),
		Problems: problems}
	for i, s := range all {
		out.Kinds[i] = newSummaryRow(s)
	}
	return out, nil
}

type overviewView struct {
	view
	summaryJSON
	SummaryURL string
}

func (h *Handler) overview(w http.ResponseWriter, r *request) {
	s, err := h.summaries(r)
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	h.render(w, r.Request, r.id, http.StatusOK, "overview", overviewView{
		view:        h.view(r.id, "Kinds", r.flash),
		summaryJSON: s,
		SummaryURL:  h.base + "/api/summary",
	})
}

func (h *Handler) summaryAPI(w http.ResponseWriter, r *request) {
	s, err := h.summaries(r)
	if err != nil {
		h.log.Error("dashboard: summarizing the kinds", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "reading the kinds failed; the server's log has the details")
		return
	}
	writeJSON(w, http.StatusOK, s)
}
