package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/jobpipe/jobpipe/dashboard"
	"github.com/jobpipe/jobpipe/metrics"
)

const serveUsage = `usage: jobpipe serve [--addr HOST:PORT] [--read-only] [--auth-reads] [--auth-metrics]
                     [--base-path PATH] [--trusted-origin ORIGIN] [--secure-cookies] [--database-url URL]

Serves the web dashboard and the Prometheus metrics: the dashboard at / (or --base-path), the
metrics at /metrics (jobpipe_running_jobs, jobpipe_max_running_jobs and jobpipe_remaining_work_count
of every registered kind, read from the database at each scrape). Stops on SIGINT or SIGTERM,
letting requests in flight finish.

The dashboard's actions (retry, discard, run now, pause, limits) need credentials, read from the
environment so they stay out of the process list:
  JOBPIPE_DASHBOARD_TOKEN       a token of at least 16 characters: "Authorization: Bearer TOKEN",
                                or typed into the dashboard's login form
  JOBPIPE_DASHBOARD_BASIC_AUTH  USER:PASSWORD for HTTP basic authentication (password of at least
                                16 characters)
Without credentials serve refuses to start unless it is --read-only or listens on loopback only.

flags:
  --addr HOST:PORT      where to listen (default 127.0.0.1:8080; :8080 for every interface)
  --read-only           no actions: the dashboard only shows, and refuses every POST
  --auth-reads          every page needs the credentials too (job data may be private); /metrics stays
                        open unless --auth-metrics is given too
  --auth-metrics        /metrics needs the credentials too: a bearer token or basic auth, as
                        Prometheus's authorization or basic_auth settings send them
  --base-path PATH      serve the dashboard under PATH (/ops/jobs) behind a proxy
  --trusted-origin O    an origin allowed to POST besides the dashboard's own (a proxy's https://host);
                        repeat for several
  --secure-cookies      mark cookies Secure: set it behind a proxy that terminates TLS
  --database-url URL    the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
`

func init() {
	register(&command{name: "serve", summary: "serve the web dashboard and the Prometheus metrics", usage: serveUsage, run: runServe})
}

// origins collects repeated --trusted-origin flags.
type origins []string

func (o *origins) String() string     { return strings.Join(*o, ",") }
func (o *origins) Set(v string) error { *o = append(*o, v); return nil }

// shutdownGrace bounds how long serve waits for requests in flight when told to stop.
const shutdownGrace = 10 * time.Second

func runServe(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dbURL := databaseURLFlag(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "where to listen")
	readOnly := fs.Bool("read-only", false, "no actions")
	authReads := fs.Bool("auth-reads", false, "pages need the credentials too")
	authMetrics := fs.Bool("auth-metrics", false, "/metrics needs the credentials too")
	basePath := fs.String("base-path", "", "serve the dashboard under this path")
	secure := fs.Bool("secure-cookies", false, "mark cookies Secure")
	var trusted origins
	fs.Var(&trusted, "trusted-origin", "an origin allowed to POST")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: serve takes flags only", pos[0])
	}
	cfg := dashboard.Config{Token: e.Getenv("JOBPIPE_DASHBOARD_TOKEN"), ReadOnly: *readOnly, RequireAuthForReads: *authReads,
		BasePath: *basePath, SecureCookies: *secure, TrustedOrigins: trusted,
		Logger: slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if basic := e.Getenv("JOBPIPE_DASHBOARD_BASIC_AUTH"); basic != "" {
		user, password, ok := strings.Cut(basic, ":")
		if !ok {
			return errors.New("JOBPIPE_DASHBOARD_BASIC_AUTH has no ':': write it as USER:PASSWORD")
		}
		cfg.BasicAuthUser, cfg.BasicAuthPassword = user, password
	}
	if *authMetrics && cfg.Token == "" && cfg.BasicAuthUser == "" {
		return errors.New("--auth-metrics needs credentials: set JOBPIPE_DASHBOARD_TOKEN or JOBPIPE_DASHBOARD_BASIC_AUTH")
	}
	if err := cfg.CheckListen(*addr); err != nil {
		return fmt.Errorf("%w\nfor jobpipe serve: set JOBPIPE_DASHBOARD_TOKEN or JOBPIPE_DASHBOARD_BASIC_AUTH, or add --read-only, or listen with --addr 127.0.0.1:PORT", err)
	}
	pool, err := e.connect(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg.DB = pool
	dash, err := dashboard.New(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(pool, metrics.WithLogger(cfg.Logger)),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	if *authMetrics {
		mux.Handle("GET "+metrics.Path, dash.RequireAuth(metrics.Handler(reg)))
	} else {
		metrics.Mount(mux, reg)
	}
	mux.Handle(*basePath+"/", dash)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w; give another --addr", *addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(e.Stdout, "jobpipe serve: dashboard on %s%s/, metrics on %s%s (%s)\n", base, *basePath, base, metrics.Path,
		accessText(cfg, *authMetrics))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	<-served
	fmt.Fprintln(e.Stdout, "jobpipe serve: stopped")
	return nil
}

// accessText says who may read and change what, for the start-up line.
func accessText(c dashboard.Config, authMetrics bool) string {
	var access string
	switch {
	case c.ReadOnly:
		access = "read-only"
	case c.Token != "" || c.BasicAuthUser != "":
		access = "actions need credentials"
	default:
		access = "actions open to anyone on loopback"
	}
	switch {
	case authMetrics && c.RequireAuthForReads:
		access += "; pages and metrics need credentials"
	case authMetrics:
		access += "; metrics need credentials"
	case c.RequireAuthForReads:
		// The pages are private: say plainly that the metrics are not.
		access += "; pages need credentials; metrics open to anyone (--auth-metrics protects them)"
	}
	return access
}
