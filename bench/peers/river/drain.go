package main

import (
	"context"
	"sync/atomic"
	"time"
)

// drain is jobpipe's drain on River: insert the jobs first, then time the client from its start to
// the last completion.
func (s *session) drain(ctx context.Context) error {
	jobs := int64(s.opts.jobs)
	var inserted atomic.Int64
	stop := progress(s.log, s.opts.progress, "drain insert", func() (int64, int64) {
		n := inserted.Load()
		return n, n
	})
	insertStart := time.Now()
	err := s.insert(ctx, 0, jobs, &inserted)
	insertTime := time.Since(insertStart)
	stop()
	if err != nil {
		return err
	}
	if err := s.analyze(ctx); err != nil {
		return err
	}
	stop = progress(s.log, s.opts.progress, "drain", func() (int64, int64) {
		c := s.completed.Load()
		return c, jobs - c
	})
	start := time.Now()
	err = s.start(ctx)
	if err == nil {
		err = s.waitCompleted(ctx, jobs)
	}
	elapsed := time.Since(start)
	stop()
	if err != nil {
		return err
	}
	if err := s.stop(ctx); err != nil {
		return err
	}
	acc, err := s.account(ctx, jobs)
	if err != nil {
		return err
	}
	dead, err := s.deadTuples(ctx)
	if err != nil {
		return err
	}
	r := s.report
	r.result("scenario", "drain")
	r.result("peer", "river")
	r.result("jobs", jobs)
	r.result("workers", s.opts.workers)
	r.result("seconds", round(elapsed.Seconds(), 2))
	r.result("jobs_per_s", rate(jobs, elapsed))
	r.result("insert_jobs_per_s", rate(jobs, insertTime))
	r.result("dead_tuples", dead)
	acc.record(r, s.unexpected.Load())
	return nil
}
