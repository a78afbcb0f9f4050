/*
 * job_impl.h - what job.c (the accepted job's life) and job_submit.c (building and
 * queuing it) share, and nothing outside them uses.
 */
#ifndef GR_JOB_IMPL_H
#define GR_JOB_IMPL_H

#include <graphrun.h>
#include "runtime/job.h"

/* The job's memory, once nothing uses it (job_free) or it was never shared (job_alloc). */
void gr__job_free_memory(gr_job *job);

/* The handle lives while the caller holds it or the job is incomplete (its callback uses
 * it): the last of the two gives it back, so once a complete job is destroyed its handle
 * is refused at once, however long the job's memory lingers. */
void gr__job_drop_handle(gr_job *job);

/* The job's result so far: its first error's status, or GR_OK. job->mu held. */
gr_status gr__job_result_locked(const gr_job *job);

/* Run the callback (if any), then mark the job complete and wake its waiters, then drop the
 * reference held while incomplete. */
void gr__job_finish(gr_job *job, gr_status result);

#endif /* GR_JOB_IMPL_H */
