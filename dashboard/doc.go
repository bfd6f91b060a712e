// Package dashboard is jobpipe's web dashboard: an http.Handler that shows every registered kind with
// live counts, lists a kind's jobs with filters and paging, shows a job in full, and lets an operator
// retry, discard or hurry jobs and pause, resume and limit kinds and keys.
//
// It works from the database alone, through packages admin and limits, so it runs in any process that
// can reach the database: `jobpipe serve`, or the application's own server:
//
//	h, err := dashboard.New(dashboard.Config{DB: pool, Token: token, BasePath: "/ops/jobs"})
//	if err != nil { ... }
//	mux.Handle("/ops/jobs/", h)
//
// Pages are Go templates and the stylesheet and script are embedded: nothing is loaded from another
// site, and the pages work without JavaScript (the script only refreshes the overview's counts every
// two seconds from GET /api/summary).
//
// # Routes
//
// Under Config.BasePath:
//
//	GET  /                                   the kinds, with their counts (PollInterval)
//	GET  /api/summary                        the same as JSON
//	GET  /kinds/{kind}?state=&key=&before=   a kind: counts, a page of jobs (newest first), its limits
//	GET  /kinds/{kind}/jobs/{id}             one job: data, attempts, last error, times, lease holder
//	POST /kinds/{kind}/actions/{action}      retry, discard, run-now (form fields id..., reason),
//	                                         pause, resume, set-max-running, clear-max-running,
//	                                         set-key-limit, clear-key-limit (value),
//	                                         set-key, clear-key, pause-key, resume-key (key, value)
//	GET  /login, POST /login, POST /logout   the login form and its session
//	GET  /static/...                         the embedded stylesheet and script
//
// A POST answers with a redirect to the page it came from (its "back" field, when it is a path of the
// dashboard) and the outcome as a message shown there once; an input it refuses gets 400 or 404 with a
// page that says what was wrong, and nothing is changed.
//
// # Security
//
// Reading is open to whoever reaches the dashboard unless Config.RequireAuthForReads is set; handlers
// served beside it, such as metrics, are not covered: wrap them in Handler.RequireAuth. Changes
// need authentication: the token as "Authorization: Bearer <token>", basic authentication, or a session
// from the login form (a cookie that is HttpOnly, SameSite=Strict and signed with a key derived from
// the credentials, so that changing them ends every session). Secrets are compared in constant time.
//
// Every POST passes net/http's CrossOriginProtection (Sec-Fetch-Site and Origin) and carries a
// synchronizer token: an HMAC of the session, or of the basic-auth user, in every form. A request with
// a bearer token needs none, since no browser sends that header on its own. Every response carries a
// Content-Security-Policy of 'self' only, frame-ancestors 'none', X-Frame-Options DENY, nosniff and a
// same-origin Referrer-Policy.
//
// With Config.ReadOnly no action is shown and every POST but login and logout is refused with 403.
// With no credentials and ReadOnly false anyone may change things: Config.CheckListen refuses such a
// dashboard on anything but a loopback address, and the handler then answers only requests addressed
// to a loopback host name, so that a page of another site cannot reach it through DNS rebinding.
package dashboard
