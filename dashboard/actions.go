package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/limits"
)

// kindAction is one change the dashboard makes to a kind, its jobs or its limits. It validates its
// form and returns the message shown after the redirect.
type kindAction func(ctx context.Context, h *Handler, k *admin.Kind, form url.Values) (flash, error)

// kindActions are the changes, by the name in their path: POST /kinds/{kind}/actions/{name}.
var kindActions = map[string]kindAction{
	"retry":             retryJobs,
	"discard":           discardJobs,
	"run-now":           runJobsNow,
	"pause":             pauseKind,
	"resume":            resumeKind,
	"set-max-running":   setMaxRunning,
	"clear-max-running": clearMaxRunning,
	"set-key-limit":     setKeyLimit,
	"clear-key-limit":   clearKeyLimit,
	"set-key":           setKey,
	"clear-key":         clearKey,
	"pause-key":         pauseKey,
	"resume-key":        resumeKey,
}

// kindAction runs the action of the path and redirects to the form's page (redirect-after-POST)
// with its outcome as a flash message. A refused input is answered at once, with its status.
func (h *Handler) kindAction(w http.ResponseWriter, r *request) {
	name := r.PathValue("action")
	act, ok := kindActions[name]
	if !ok {
		h.answerError(w, r, notFound("There is no action %q.", truncate(40, name)))
		return
	}
	ctx := r.Context()
	k, err := h.loadKind(ctx, r.PathValue("kind"))
	if err != nil {
		h.answerError(w, r, err)
		return
	}
	f, err := act(ctx, h, k, r.PostForm)
	if err != nil {
		h.log.Warn("dashboard: change refused or failed", "action", name, "kind", k.Name(), "by", r.id.via,
			"remote", r.RemoteAddr, "err", err)
		h.answerError(w, r, err)
		return
	}
	h.log.Info("dashboard: change", "action", name, "kind", k.Name(), "by", r.id.via, "remote", r.RemoteAddr,
		"outcome", f.Message)
	h.setFlash(w, r.Request, f)
	http.Redirect(w, r.Request, h.localPath(r.PostForm.Get("back"), kindURL(h.base, k.Name())), http.StatusSeeOther)
}

func retryJobs(ctx context.Context, h *Handler, k *admin.Kind, form url.Values) (flash, error) {
	ids, err := parseIDs(form["id"])
	if err != nil {
		return flash{}, err
	}
	res, err := admin.Retry(ctx, h.cfg.DB, k, ids)
	return describeResult("Retried %s: now waiting, due at once.", res), err
}

func discardJobs(ctx context.Context, h *Handler, k *admin.Kind, form url.Values) (flash, error) {
	ids, err := parseIDs(form["id"])
	if err != nil {
		return flash{}, err
	}
	reason, err := parseReason(form.Get("reason"))
	if err != nil {
		return flash{}, err
	}
	res, err := admin.Discard(ctx, h.cfg.DB, k, ids, reason)
	return describeResult("Discarded %s: now failed.", res), err
}

func runJobsNow(ctx context.Context, h *Handler, k *admin.Kind, form url.Values) (flash, error) {
	ids, err := parseIDs(form["id"])
	if err != nil {
		return flash{}, err
	}
	res, err := admin.RunNow(ctx, h.cfg.DB, k, ids)
	return describeResult("Made %s due now: they start as soon as their key's order and limits allow.", res), err
}

// describeResult says which jobs changed (done is a sentence with %s for them) and why the others
// did not. Nothing changed is an error.
func describeResult(done string, res admin.ActionResult) flash {
	var b strings.Builder
	if len(res.Changed) > 0 {
		fmt.Fprintf(&b, done, plural(len(res.Changed), "job")+" ("+listIDs(res.Changed)+")")
	} else {
		b.WriteString("No job changed.")
	}
	if len(res.Skipped) > 0 {
		fmt.Fprintf(&b, " Left %s as %s:", plural(len(res.Skipped), "job"), map[bool]string{true: "it was", false: "they were"}[len(res.Skipped) == 1])
		for i, s := range res.Skipped {
			if i == 20 {
				fmt.Fprintf(&b, " and %d more", len(res.Skipped)-i)
				break
			}
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s #%d (%s)", sep, s.ID, s.Reason)
		}
		b.WriteString(".")
	}
	return flash{Error: len(res.Changed) == 0, Message: b.String()}
}

func listIDs(ids []int64) string {
	parts := make([]string, 0, min(len(ids), 21))
	for i, id := range ids {
		if i == 20 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ids)-i))
			break
		}
		parts = append(parts, "#"+itoa(id))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func pauseKind(ctx context.Context, h *Handler, k *admin.Kind, _ url.Values) (flash, error) {
	err := limits.Pause(ctx, h.cfg.DB, k.Name())
	return ok("Paused %s: no new job starts; running jobs finish.", k.Name()), err
}

func resumeKind(ctx context.Context, h *Handler, k *admin.Kind, _ url.Values) (flash, error) {
	err := limits.Resume(ctx, h.cfg.DB, k.Name())
	return ok("Resumed %s.", k.Name()), err
}

func setMaxRunning(ctx context.Context, h *Handler, k *admin.Kind, form url.Values) (flash, error) {
	n, err := parseLimit("total limit", form.Get("value"), limits.MaxMaxRunning)
	if err != nil {
		return flash{}, err
	}
	err = limits.SetMaxRunning(ctx, h.cfg.DB, k.Name(), n)
	return ok("Set the total limit of %s to %d%s.", k.Name(), n, halts(n)), err
}

func clearMaxRunning(ctx context.Context, h *Handler, k *admin.Kind, _ url.Values) (flash, error) {
	err := limits.ClearMaxRunning(ctx, h.cfg.DB, k.Name())
	return ok("Cleared the total limit of %s.", k.Name()), err
}

func setKeyLimit(ctx context.Context, h *Handler, k *admin.Kind, form url.Values) (flash, error) {
	if err := needKey(k); err != nil {
		return flash{}, err
	}
	n, err := parseLimit("per-key limit", form.Get("value"), limits.MaxKeyLimit)
	if err != nil {
		return flash{}, err
	}
	err = limits.SetKeyLimit(ctx, h.cfg.DB, k.Name(), n)
	return ok("Set the per-key limit of %s to %d%s.", k.Name(), n, halts(n)), err
}

func clearKeyLimit(ctx context.Context, h *Handler, k *admin.Kind, _ url.Values) (flash, error) {
	if err := needKey(k); err != nil {
		return flash{}, err
	}
	err := limits.ClearKeyLimit(ctx, h.cfg.DB, k.Name())
	return ok("Cleared the per-key limit of %s: its configured limit applies.", k.Name()), err
}

func setKey(ctx context.Context, h *Handler, k *admin.Kind, form url.Values) (flash, error) {
	key, err := parseKey(k, form.Get("key"))
	if err != nil {
		return flash{}, err
	}
	n, err := parseLimit("key's limit", form.Get("value"), limits.MaxKeyLimit)
	if err != nil {
		return flash{}, err
	}
	err = limits.SetKey(ctx, h.cfg.DB, k.Name(), key, n)
	return ok("Set the limit of %s key %s to %d%s.", k.Name(), key, n, halts(n)), err
}

func clearKey(ctx context.Context, h *Handler, k *admin.Kind, form url.Values) (flash, error) {
	key, err := parseKey(k, form.Get("key"))
	if err != nil {
		return flash{}, err
	}
	err = limits.ClearKey(ctx, h.cfg.DB, k.Name(), key)
	return ok("Cleared the limit of %s key %s: the per-key limit applies.", k.Name(), key), err
}

func pauseKey(ctx context.Context, h *Handler, k *admin.Kind, form url.Values) (flash, error) {
	key, err := parseKey(k, form.Get("key"))
	if err != nil {
		return flash{}, err
	}
	err = limits.PauseKey(ctx, h.cfg.DB, k.Name(), key)
	return ok("Paused %s key %s: no new job of it starts.", k.Name(), key), err
}

func resumeKey(ctx context.Context, h *Handler, k *admin.Kind, form url.Values) (flash, error) {
	key, err := parseKey(k, form.Get("key"))
	if err != nil {
		return flash{}, err
	}
	err = limits.ResumeKey(ctx, h.cfg.DB, k.Name(), key)
	return ok("Resumed %s key %s.", k.Name(), key), err
}

func needKey(k *admin.Kind) error {
	if len(k.Info.Key) == 0 {
		return badRequest("Kind %q has no key, so it has no per-key limit: set its total limit instead.", k.Name())
	}
	return nil
}

func halts(n int) string {
	if n == 0 {
		return " (halted: no new job starts)"
	}
	return ""
}

func ok(format string, args ...any) flash { return flash{Message: fmt.Sprintf(format, args...)} }
