"""Rings: the one way the kernels write a ring of shared-memory slots (cutlass.pipeline).

A ring has `slots` stages, each a full and an empty mbarrier: producers fill slot i % slots and
arrive on its full barrier, consumers wait for it, read, and arrive on its empty barrier, and the
producer of chunk i + slots waits for that before it refills the slot.  thread_ring makes one
whose every arrival is a thread's own; tma_ring one whose only producer is TMA (the bytes arm the
stage in producer_acquire).  state / state_at / as_producer are the PipelineStates the loops
walk with; tma_acquire and arm are the TMA producer's side of a stage that also counts other
arrivals; publish makes every ring's initialisation visible before the first arrival.
"""
from __future__ import annotations

import dataclasses

import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass import Int32


def thread_ring(slots: int, barriers, producers: int, consumers: int):
    """A ring's full / empty barriers (full at barriers, empty after it) as a cutlass.pipeline
    PipelineAsync in which every arrival is one thread's (a TMA's arrive-and-expect-tx counts as
    one producer); a producer's first round finds its slots free (PipelineState's phase rule).
    No CTA sync here (defer_sync): the kernel fences and syncs once, after all its barriers."""
    return pipeline.PipelineAsync.create(
        num_stages=slots, barrier_storage=barriers, defer_sync=True,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, producers),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, consumers))


def tma_ring(slots: int, barriers, tx_bytes: int, consumers: int):
    """A ring whose only producer is TMA, as a cutlass.pipeline PipelineTmaAsync: producer_acquire
    waits for the slot and arms its full barrier with tx_bytes (one elected lane); the copies
    complete it.  Each of the `consumers` threads releases for itself (the pipeline's default
    signals from lane 0 of each warp, whose arrive orders only that lane's reads).  No CTA sync
    here (defer_sync), as thread_ring."""
    ring = pipeline.PipelineTmaAsync.create(
        num_stages=slots, barrier_storage=barriers, defer_sync=True, tx_count=tx_bytes,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, consumers))
    return dataclasses.replace(ring, is_signaling_thread=True)


def publish(cz: int = 1):
    """After every ring's barriers are initialised (thread_ring's defer_sync): the initialisation
    fenced, then the CTA synced, or with cz > 1 CTAs per cluster the cluster, whose peers multicast
    and arrive into this CTA's slots."""
    cluster = cute.make_layout(cz) if cz > 1 else None
    pipeline.pipeline_init_arrive(cluster, is_relaxed=True)
    pipeline.pipeline_init_wait(cluster)


def state(slots: int, producer: bool):
    """A fresh state of the producer's or the consumers' side: slot 0, and the phase that passes a
    producer's first round over fresh barriers."""
    return pipeline.make_pipeline_state(
        pipeline.PipelineUserType.Producer if producer else pipeline.PipelineUserType.Consumer, slots)


def state_at(slots: int, c: Int32, producer: bool):
    """The state of chunk c, state(slots, producer) advanced c times, formed without the steps: for
    a loop that keeps no state across its iterations, or a producer that fills a slot ahead."""
    return pipeline.PipelineState(slots, c, c % slots, ((c // slots) % 2) ^ (1 if producer else 0))


def as_producer(st):
    """The producer's state of the chunk a consumer's state `st` is at: the same slot, the other phase
    (producer_acquire with it waits until chunk c - slots has released the slot)."""
    return pipeline.PipelineState(st.stages, st.count, st.index, st.phase ^ 1)


def arm(bar, tx_bytes):
    """The TMA issuer's arrival on a full barrier: one elected lane of the calling warp expects the
    bytes its copies will bring.  tx_bytes: an int, or a function that forms a runtime count in the
    elected lane's branch (where the count was always formed: moved before it, ptxas allocates the
    loader's registers differently)."""
    with cute.arch.elect_one():
        tx = tx_bytes() if callable(tx_bytes) else tx_bytes
        cute.arch.mbarrier_arrive_and_expect_tx(bar, tx)    # cutlass.pipeline arms only a fixed count


def tma_acquire(ring, st, tx_bytes):
    """The TMA issuer's side of a stage whose full barrier counts other arrivals too: wait until the
    slot is free, arm its full barrier with tx_bytes (arm), and return it for the copies."""
    ring.producer_acquire(st)
    bar = ring.producer_get_barrier(st)
    arm(bar, tx_bytes)
    return bar
