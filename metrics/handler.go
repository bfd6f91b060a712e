package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where Mount serves metrics.
const Path = "/metrics"

// Handler serves g's metrics in the exposition format the scraper asks for. A metric that cannot
// be gathered is left out and the rest served (promhttp.ContinueOnError), so one failing collector
// never hides the others.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Mount serves g's metrics on GET /metrics of mux.
func Mount(mux *http.ServeMux, g prometheus.Gatherer) {
	mux.Handle("GET "+Path, Handler(g))
}
