"""The store's detached job queue: ListDetachedJobs (one session's jobs: its owner; every session's: operators),
RequeueDetachedJob (operators)."""

from __future__ import annotations

import grpc

from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.relay import relay
from services.scheduler.public_api import request_texts
from shared.errors import permission_denied, require, rpc
from shared.security.auth import caller


class Jobs:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub) -> None:
        self._store = store

    @rpc
    async def ListDetachedJobs(self, request: scheduler_pb2.ListDetachedJobsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListDetachedJobsResponse:
        # A named session is checked like every session-scoped call (its owner or an operator).
        if not request.session_id and not caller().is_operator:
            raise permission_denied("session_id: only an operator lists every session's jobs; name one of your sessions")
        return await relay(self._store.ListDetachedJobs, store_pb2.ListDetachedJobsRequest(
            session_id=request.session_id, statuses=request_texts(request, "statuses"), page_size=request.page_size, page_token=request.page_token),
            scheduler_pb2.ListDetachedJobsResponse, "jobs", "next_page_token")

    @rpc
    async def RequeueDetachedJob(self, request: scheduler_pb2.RequeueDetachedJobRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.RequeueDetachedJobResponse:
        if not caller().is_operator:
            raise permission_denied("only an operator queues a detached job again")
        require(request.job_id, "job_id", "a job's id, as ListDetachedJobs shows it")
        return await relay(self._store.RequeueDetachedJob, store_pb2.RequeueDetachedJobRequest(job_id=request.job_id),
                           scheduler_pb2.RequeueDetachedJobResponse, "job")
