package dashboard

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// pageSize is how many jobs the job list shows at once.
const pageSize = 50

// kindView is the kind page: its counts, a page of its jobs, and its limits.
type kindView struct {
	view
	Kind    *admin.Kind
	Summary summaryRow
	Keyed   bool
	// Filter is the list's filter as given; States lists the choices.
	State  string
	Key    string
	States []jobinfo.State
	Jobs   []admin.Job
	// Older is the link to the next page of older jobs, "" on the last page; Newest the link to
	// the first page, "" on it.
	Older, Newest string
	// Self is this page's path, where actions return.
	Self string
	// Limits are the kind's stored limits; Keys its key overrides.
	Limits limits.Kind
	Keys   []limits.Key
	// KeyLimitInForce is the per-key limit of a key without an override.
	KeyLimitInForce int
	// MaxMaxRunning and MaxKeyLimit bound the limit inputs.
	MaxMaxRunning, MaxKeyLimit int
}

func (h *Handler) kindPage(w http.ResponseWriter, r *request) {
	ctx := r.Context()
	k, err := h.loadKind(ctx, r.PathValue("kind"))
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	q := r.URL.Query()
	f := admin.Filter{Limit: pageSize + 1} // one more tells whether there is an older page
	if s := q.Get("state"); s != "" {
		if f.State, err = admin.ParseState(s); err != nil {
			h.answerError(w, r, badRequest("Unknown state %q: choose waiting, running, processed or failed.", truncate(40, s)))
			return
		}
	}
	if key := q.Get("key"); key != "" {
		if f.Key, err = parseKey(k, key); err != nil {
			h.answerError(w, r, err)
			return
		}
	}
	if b := q.Get("before"); b != "" {
		if f.BeforeID, err = parseID(b); err != nil {
			h.answerError(w, r, err)
			return
		}
	}
	jobs, err := admin.ListJobs(ctx, h.cfg.DB, k, f)
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	sum, err := admin.Summarize(ctx, h.cfg.DB, k)
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	lim, keys, err := limits.List(ctx, h.cfg.DB, k.Name())
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	v := kindView{
		view: h.view(r.id, k.Name(), r.flash), Kind: k, Summary: newSummaryRow(sum), Keyed: len(k.Info.Key) > 0,
		State: string(f.State), Key: q.Get("key"), States: jobinfo.States, Jobs: jobs,
		Self: kindURL(h.base, k.Name()), Limits: lim[0], Keys: keys,
		KeyLimitInForce: lim[0].EffectiveKeyLimit(limits.Key{}), MaxMaxRunning: limits.MaxMaxRunning, MaxKeyLimit: limits.MaxKeyLimit,
	}
	if r.URL.RawQuery != "" {
		v.Self += "?" + r.URL.RawQuery
	}
	page := url.Values{}
	if f.State != "" {
		page.Set("state", string(f.State))
	}
	if v.Key != "" {
		page.Set("key", v.Key)
	}
	if f.BeforeID != 0 {
		v.Newest = withQuery(kindURL(h.base, k.Name()), page)
	}
	if len(jobs) > pageSize {
		v.Jobs = jobs[:pageSize]
		page.Set("before", strconv.FormatInt(jobs[pageSize-1].ID, 10))
		v.Older = withQuery(kindURL(h.base, k.Name()), page)
	}
	h.render(w, r.Request, r.id, http.StatusOK, "kind", v)
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
