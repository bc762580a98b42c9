package main

// The jobs of 'status --tree': a job's lock path is listed with its record
// (LAST RUN; job in --json), even while the job is idle and its lock path
// gone, found by its record <lock path>.run.

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/zklock/zklock"
)

// jobRecordSuffix ends the name of a job's record: <lock path>.run.
const jobRecordSuffix = ".run"

// withJobs reads the records among runs (leaves named like one; a leaf
// whose data is no job's record is left out) and returns paths with the
// jobs' lock paths added, sorted, and each job's record by its lock path.
func withJobs(ctx context.Context, client *zklock.Client, paths, runs []string) ([]string, map[string]zklock.JobState, error) {
	jobs := map[string]zklock.JobState{}
	listed := map[string]bool{}
	for _, p := range paths {
		listed[p] = true
	}
	for _, r := range runs {
		p := strings.TrimSuffix(r, jobRecordSuffix)
		j, err := client.NewJob(p, time.Millisecond) // reading needs no period
		if err != nil {
			continue // not a lock path's sibling
		}
		st, err := j.State(ctx)
		if err != nil {
			return nil, nil, err
		}
		if st.Last.Outcome == "" {
			continue
		}
		jobs[p] = st
		if !listed[p] {
			listed[p] = true
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	return paths, jobs, nil
}

// lastRunCell is the LAST RUN column of the tree: a job's last outcome and
// when ("succeeded 2026-11-25T14:05:41.802Z", "failed (error) ..."), "-"
// for a lock path that is no job's.
func lastRunCell(jobs map[string]zklock.JobState, path string) string {
	st, ok := jobs[path]
	if !ok {
		return "-"
	}
	r := st.Last
	switch r.Outcome {
	case "running":
		return "running since " + stamp(r.Start)
	case "failed":
		return "failed (" + r.Cause + ") " + stamp(r.End)
	}
	return r.Outcome + " " + stamp(r.End)
}
