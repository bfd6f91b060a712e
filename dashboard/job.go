package dashboard

import (
	"net/http"

	"github.com/jobpipe/jobpipe/admin"
)

// jobView is the job page.
type jobView struct {
	view
	Kind *admin.Kind
	Job  admin.Job
	// Due: a waiting job whose time has come (Run now has nothing to do).
	Due  bool
	Self string
}

func (h *Handler) jobPage(w http.ResponseWriter, r *request) {
	ctx := r.Context()
	k, err := h.loadKind(ctx, r.PathValue("kind"))
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		h.answerError(w, r, notFound("There is no job %q: job ids are positive integers.", truncate(40, r.PathValue("id"))))
		return
	}
	job, err := admin.GetJob(ctx, h.cfg.DB, k, id)
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	h.render(w, r.Request, r.id, http.StatusOK, "job", jobView{
		view: h.view(r.id, k.Name()+" #"+itoa(id), r.flash), Kind: k, Job: job,
		Due:  isDue(job),
		Self: jobURL(h.base, k.Name(), id),
	})
}
