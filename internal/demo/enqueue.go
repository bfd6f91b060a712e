package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jobpipe/jobpipe/dispatcher"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// plan is what the demo enqueued, to check the outcome against.
type plan struct {
	deliveries, deliveryDups int // new deliveries, re-sent events refused
	customers                int
	posts, postDups, blogs   int
	reminders                int
	imports, reports         int
	enqueueTime              time.Duration
	sent                     int
}

// enqueue sends every job before the dispatchers start, so the duplicates are known exactly: each
// duplicate of a waiting job is refused, and the refusals are counted from the results.
func enqueue(ctx context.Context, cfg Config, k kinds) (*plan, error) {
	p := &plan{customers: 10, blogs: 50}
	start := time.Now()
	// Webhook deliveries: every tenth event is sent twice by its source.
	var deliveries []Delivery
	for i := range cfg.Jobs / 2 {
		c := int64(i % p.customers)
		d := Delivery{CustomerID: c, EventID: fmt.Sprintf("evt-%06d", i), URL: fmt.Sprintf("https://customer-%d.example/hooks", c)}
		deliveries = append(deliveries, d)
		if i%10 == 9 {
			deliveries = append(deliveries, d)
		}
	}
	res, err := dispatcher.EnqueueMany(ctx, cfg.DB, k.deliveries, deliveries)
	if err != nil {
		return nil, err
	}
	p.deliveries, p.deliveryDups = split(res)
	// Blog post changes, in order per blog; some posts change again before they were processed.
	var posts []PostSync
	seq := map[int64]int64{}
	for i := range cfg.Jobs * 3 / 10 {
		blog := int64(i % p.blogs)
		post := int64(i)
		if i%20 == 19 {
			post = int64(i - p.blogs) // the same post as the blog's previous change: still waiting
		}
		seq[blog]++
		posts = append(posts, PostSync{BlogID: blog, PostID: post, Seq: seq[blog]})
	}
	res, err = dispatcher.EnqueueMany(ctx, cfg.DB, k.posts, posts)
	if err != nil {
		return nil, err
	}
	p.posts, p.postDups = split(res)
	// Reminders due over the next few seconds.
	p.reminders = max(cfg.Jobs/25, 10)
	for i := range p.reminders {
		in := time.Duration(500+i*6000/p.reminders) * time.Millisecond
		if _, err := dispatcher.Enqueue(ctx, cfg.DB, k.reminders, Reminder{UserID: int64(i), Text: "stand-up"}, dispatcher.ProcessIn(in)); err != nil {
			return nil, err
		}
	}
	p.imports, p.reports = 20, 5
	for i := range p.imports {
		if _, err := dispatcher.Enqueue(ctx, cfg.DB, k.imports, Import{Source: fmt.Sprintf("feed-%d", i)}); err != nil {
			return nil, err
		}
	}
	for i := range p.reports {
		if _, err := dispatcher.Enqueue(ctx, cfg.DB, k.reports, Report{Name: fmt.Sprintf("q%d", i+1)}); err != nil {
			return nil, err
		}
	}
	p.enqueueTime = time.Since(start)
	p.sent = len(deliveries) + len(posts) + p.reminders + p.imports + p.reports
	return p, nil
}

func split(res []uniqueness.Result) (inserted, duplicates int) {
	for _, r := range res {
		if r.Duplicate {
			duplicates++
		} else {
			inserted++
		}
	}
	return inserted, duplicates
}

func (p *plan) print(out io.Writer) {
	fmt.Fprintf(out, "enqueued %d jobs in %v:\n", p.sent, p.enqueueTime.Round(time.Millisecond))
	fmt.Fprintf(out, "  webhook_delivery  %5d new, %4d re-sent events refused as duplicates (%d customers, at most %d at once each)\n",
		p.deliveries, p.deliveryDups, p.customers, DeliveryLimit)
	fmt.Fprintf(out, "  blog_post_sync    %5d new, %4d changes to still-waiting posts refused (%d blogs, one at a time, in order)\n",
		p.posts, p.postDups, p.blogs)
	fmt.Fprintf(out, "  reminder          %5d scheduled over the next %v\n", p.reminders, 6500*time.Millisecond)
	fmt.Fprintf(out, "  flaky_import      %5d that fail twice, then succeed (max %d attempts)\n", p.imports, ImportAttempts)
	fmt.Fprintf(out, "  poison_report     %5d that always fail (max %d attempts)\n", p.reports, ReportAttempts)
}
