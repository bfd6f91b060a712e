package demo

import (
	"time"

	"github.com/jobpipe/jobpipe/backoff"
	"github.com/jobpipe/jobpipe/jobinfo"
)

// The demo's kinds, one per story the users told.

// Delivery is a webhook delivery: at most DeliveryLimit run at once per customer, so one slow endpoint
// is not hammered and does not slow the others; an event is delivered once however often it is sent.
type Delivery struct {
	CustomerID int64  `jobpipe:"customer_id,key"`
	EventID    string `jobpipe:"event_id,unique"`
	URL        string `jobpipe:"url"`
}

// DeliveryLimit is how many deliveries of one customer run at once.
const DeliveryLimit = 3

// PostSync processes one blog's changes one at a time, in the order they happened (the Fieldwire
// table): a blog is the key, and a change is unique until it runs.
type PostSync struct {
	BlogID int64 `jobpipe:"blog_id,key"`
	PostID int64 `jobpipe:"post_id,unique"`
	Seq    int64 `jobpipe:"seq"`
}

// Reminder is sent at its time, never before.
type Reminder struct {
	UserID int64  `jobpipe:"user_id"`
	Text   string `jobpipe:"text"`
}

// Import fails twice (a flaky upstream) and then succeeds.
type Import struct {
	Source string `jobpipe:"source"`
}

// Report always fails: a poison job, failed for good after its attempts.
type Report struct {
	Name string `jobpipe:"name"`
}

// Attempts given to the failing kinds.
const (
	ImportAttempts = 5
	ReportAttempts = 3
)

type kinds struct {
	deliveries *jobinfo.Kind[Delivery]
	posts      *jobinfo.Kind[PostSync]
	reminders  *jobinfo.Kind[Reminder]
	imports    *jobinfo.Kind[Import]
	reports    *jobinfo.Kind[Report]
}

func defineKinds() kinds {
	quick := jobinfo.Backoff(backoff.Exponential{Base: 100 * time.Millisecond, Cap: time.Second, Jitter: backoff.NoJitter})
	return kinds{
		deliveries: jobinfo.MustDefine[Delivery]("webhook_delivery", jobinfo.KeyLimit(DeliveryLimit)),
		posts:      jobinfo.MustDefine[PostSync]("blog_post_sync"),
		reminders:  jobinfo.MustDefine[Reminder]("reminder", jobinfo.WithOrder(jobinfo.OrderProcessAfter)),
		imports:    jobinfo.MustDefine[Import]("flaky_import", jobinfo.MaxAttempts(ImportAttempts), quick),
		reports:    jobinfo.MustDefine[Report]("poison_report", jobinfo.MaxAttempts(ReportAttempts), quick),
	}
}

func (k kinds) specs() []jobinfo.TableSpec {
	return []jobinfo.TableSpec{k.deliveries.TableSpec(), k.posts.TableSpec(), k.reminders.TableSpec(),
		k.imports.TableSpec(), k.reports.TableSpec()}
}

func (k kinds) tables() []string {
	return []string{"webhook_delivery", "blog_post_sync", "reminder", "flaky_import", "poison_report"}
}
