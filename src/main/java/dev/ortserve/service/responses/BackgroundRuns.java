package dev.ortserve.service.responses;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.store.ResponseStore;
import dev.ortserve.store.record.StoredEvent;
import dev.ortserve.store.record.StoredResponse;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.subscription.Cancellable;
import io.smallrye.mutiny.subscription.MultiSubscriber;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;
import org.jboss.logging.Logger;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.Flow;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Background responses: each runs on the replica that admitted it, which writes its events to the
 * store as they come and renews a lease while it runs. Any replica reads, streams (replay, then
 * follow) and cancels it through the store: a cancellation reaches the running replica at once
 * (the store's cancellation channel; its next renewal as a fallback), and a run whose lease
 * lapsed (its replica died) is ended as failed by whichever replica looks at it next.
 */
@ApplicationScoped
public class BackgroundRuns {

    private static final Logger LOG = Logger.getLogger(BackgroundRuns.class);

    /** How often a follower polls the store for new events. */
    static final Duration POLL = Duration.ofMillis(25);
    /** Events read per poll. */
    static final int BATCH = 256;
    /** A follower checks the lease of a run that sends nothing about this often. */
    static final Duration LAPSE_CHECK = Duration.ofMillis(500);

    @Inject
    ResponseStore store;

    @Inject
    OrtserveConfig config;

    @Inject
    ObjectMapper mapper;

    private final Map<String, Local> local = new ConcurrentHashMap<>();
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "ortserve-background-lease");
        t.setDaemon(true);
        return t;
    });
    private volatile Cancellable cancellations;

    void start(@Observes StartupEvent event) {
        cancellations = store.cancellations().subscribe().with(this::cancelRequested,
                f -> LOG.warnf("Cancellation channel closed: %s (running replicas still see cancellations at their next lease renewal)", f.toString()));
    }

    void stop(@Observes ShutdownEvent event) {
        if (cancellations != null) cancellations.cancel();
        timers.shutdownNow();
    }

    Duration lease() {
        return config.backgroundLease();
    }

    /** Background runs this replica is generating now. */
    /** Whether a response in this status has ended (no more events will come). */
    public static boolean terminal(String status) {
        return switch (status) {
            case "completed", "incomplete", "failed", "cancelled" -> true;
            default -> false;
        };
    }

    public int running() {
        return local.size();
    }

    /** Stores the queued run, then starts generating it here; the queued response object, at once. */
    public Uni<ObjectNode> start(BackgroundRun run) {
        StoredResponse queued = run.queued();
        return store.startRun(queued, lease()).onFailure().transform(StoreFailures::of)
                .onFailure().invoke(f -> run.abandon())
                .map(v -> {
                    Local l = new Local(run);
                    local.put(run.id(), l);
                    l.begin();
                    return (ObjectNode) queued.response();
                });
    }

    private void cancelRequested(String id) {
        Local l = local.get(id);
        if (l != null) l.stop("cancelled", null);
    }

    /**
     * SIGTERM after the drain timeout: every run still generating here is ended as failed
     * ({@code server_shutdown}), so no client waits on it forever. Waits up to {@code wait} for the store.
     */
    public void failAll(Duration wait) {
        List<Uni<Void>> ends = new ArrayList<>();
        for (Local l : local.values()) {
            ends.add(l.stop("failed", error("server_shutdown", "The server shut down before this background response finished.")));
        }
        if (ends.isEmpty()) return;
        LOG.infof("Ending %d background responses as failed: the drain timeout has passed", ends.size());
        try {
            Uni.join().all(ends).andCollectFailures().await().atMost(wait);
        } catch (RuntimeException e) {
            LOG.warnf("Not every background response could be marked failed: %s", e.getMessage());
        }
    }

    ObjectNode error(String code, String message) {
        return mapper.createObjectNode().put("code", code).put("message", message);
    }

    /** A lifecycle event whose sequence number the store fills in ({@code -1} until then), as the store keeps events. */
    String terminalEvent(String type, JsonNode response) {
        ObjectNode e = mapper.createObjectNode().put("type", type).put("sequence_number", -1);
        e.set("response", response);
        return e.toString();
    }

    // ------------------------------------------------------------------ reading

    /**
     * The stored response as it stands now: a running one with its current status, one whose
     * replica died (lease lapsed) ended first as {@code lapsedStatus}.
     */
    public Uni<StoredResponse> settle(StoredResponse r, String lapsedStatus) {
        if (!r.response().path("background").asBoolean() || terminal(r.response().path("status").asText())) {
            return Uni.createFrom().item(r);
        }
        return store.runState(r.id()).flatMap(state -> {
            if (state == null) return Uni.createFrom().item(r);
            if (state.lapsed()) {
                return endLapsed(r, lapsedStatus).flatMap(v -> store.get(r.id(), r.owner())).map(again -> again == null ? r : again);
            }
            if (!state.running()) return store.get(r.id(), r.owner()).map(again -> again == null ? r : again);
            ObjectNode now = ((ObjectNode) r.response()).deepCopy().put("status", state.status());
            return Uni.createFrom().item(new StoredResponse(r.id(), r.previousId(), r.owner(), now, r.input()));
        });
    }

    private Uni<Boolean> endLapsed(StoredResponse r, String status) {
        ObjectNode response = ((ObjectNode) r.response()).deepCopy().put("status", status).put("completed_at", Instant.now().getEpochSecond());
        if (status.equals("failed")) {
            response.set("error", error("server_shutdown", "The server running this background response stopped before it finished."));
        }
        LOG.infof("Background response %s: its replica's lease lapsed; marking it %s", r.id(), status);
        return store.finishRun(new StoredResponse(r.id(), r.previousId(), r.owner(), response, r.input()),
                terminalEvent("response.failed", response), true);
    }

    /** Asks the run to stop, then waits (up to a lease and a bit) until it has ended; the response as it then stands. */
    public Uni<StoredResponse> cancel(StoredResponse r) {
        long deadline = System.nanoTime() + lease().plusSeconds(1).toNanos();
        return store.requestCancel(r.id()).flatMap(asked -> awaitEnd(r, deadline));
    }

    private Uni<StoredResponse> awaitEnd(StoredResponse r, long deadline) {
        return store.get(r.id(), r.owner()).flatMap(now -> now == null ? Uni.createFrom().item(r) : settle(now, "cancelled"))
                .flatMap(now -> {
                    if (terminal(now.response().path("status").asText()) || System.nanoTime() > deadline) {
                        return Uni.createFrom().item(now);
                    }
                    return Uni.createFrom().voidItem().onItem().delayIt().by(POLL).flatMap(v -> awaitEnd(r, deadline));
                });
    }

    /** The events after {@code after}, then the live ones, up to and with the terminal event (each element a batch read at once). */
    public Multi<List<ResponseEvent>> follow(StoredResponse r, long after) {
        Cursor cursor = new Cursor(after);
        return Multi.createBy().repeating().uni(() -> cursor, c -> next(r, c)).until(batch -> batch == END)
                .filter(batch -> !batch.isEmpty()).map(batch -> batch.stream().map(e -> ResponseEvent.of(e.event())).toList());
    }

    private static final List<StoredEvent> END = List.of();

    private static final class Cursor {
        long after;
        boolean done;
        long lastSeen = System.nanoTime();
        long lastCheck = System.nanoTime() - LAPSE_CHECK.toNanos(); // the first empty poll looks at the run at once

        Cursor(long after) {
            this.after = after;
        }
    }

    private Uni<List<StoredEvent>> next(StoredResponse r, Cursor c) {
        if (c.done) return Uni.createFrom().item(END);
        return store.events(r.id(), c.after, BATCH).flatMap(batch -> {
            if (!batch.isEmpty()) {
                c.after = batch.get(batch.size() - 1).sequence();
                c.lastSeen = System.nanoTime();
                List<StoredEvent> out = new ArrayList<>();
                for (StoredEvent e : batch) {
                    out.add(e);
                    if (e.terminal()) {
                        c.done = true;
                        break;
                    }
                }
                return Uni.createFrom().item(out);
            }
            long now = System.nanoTime();
            Uni<List<StoredEvent>> wait = Uni.createFrom().item(new ArrayList<StoredEvent>()).onItem().delayIt().by(POLL).map(l -> l);
            if (now - c.lastCheck < LAPSE_CHECK.toNanos()) return wait;
            c.lastCheck = now;
            return store.runState(r.id()).flatMap(state -> {
                if (state == null) {
                    c.done = true; // deleted or expired
                    return Uni.createFrom().item(new ArrayList<StoredEvent>());
                }
                if (state.lapsed()) return endLapsed(r, "failed").replaceWith(new ArrayList<StoredEvent>());
                if (!state.running() && c.after >= 0) {
                    // resumed after the terminal event itself: nothing follows
                    return store.events(r.id(), c.after - 1, 1).flatMap(at -> {
                        if (!at.isEmpty() && at.get(0).terminal()) {
                            c.done = true;
                            return Uni.createFrom().item(new ArrayList<StoredEvent>());
                        }
                        return ended(r, c, now, wait);
                    });
                }
                if (!state.running()) return ended(r, c, now, wait);
                return wait;
            });
        });
    }

    /** A run that has ended but whose stream has no terminal event yet: wait for it a while, then end with the stored object. */
    private Uni<List<StoredEvent>> ended(StoredResponse r, Cursor c, long now, Uni<List<StoredEvent>> wait) {
        if (now - c.lastSeen <= lease().toNanos()) return wait;
        // ended without a terminal event (the store failed at that moment): end the stream with the stored object
        return store.get(r.id(), r.owner()).map(stored -> {
            c.done = true;
            List<StoredEvent> last = new ArrayList<>();
            if (stored != null) {
                last.add(new StoredEvent(c.after + 1, terminalEvent(ResponseEvent.terminalType(stored.response().path("status").asText()), stored.response())
                        .replace("\"sequence_number\":-1", "\"sequence_number\":" + (c.after + 1))));
            }
            return last;
        });
    }

    // ------------------------------------------------------------------ a run on this replica

    /** One background run generating here: its events go to the store in order, batched while a write is in flight. */
    private final class Local implements MultiSubscriber<List<ResponseEvent>> {
        final BackgroundRun run;
        final AtomicBoolean ended = new AtomicBoolean();
        volatile Flow.Subscription subscription;
        volatile ScheduledFuture<?> renewal;
        private final List<ResponseEvent> pending = new ArrayList<>();
        private long nextSequence;
        private boolean writing;
        /** A write failed: nothing more is written (a later batch would leave a gap in the numbering). */
        private boolean broken;
        private boolean completed;
        private Runnable whenWritten;

        Local(BackgroundRun run) {
            this.run = run;
        }

        void begin() {
            long every = Math.max(50, lease().toMillis() / 3);
            renewal = timers.scheduleAtFixedRate(this::renew, 0, every, TimeUnit.MILLISECONDS);
            run.events().subscribe().withSubscriber(this);
        }

        private void renew() {
            store.renewRun(run.id(), "in_progress", lease()).subscribe().with(answer -> {
                if (answer == 1) stop("cancelled", null);
                // ended: by another party, unless it is this run's own end landing as the renewal ran
                else if (answer == -1 && !run.finishing()) abandon("it was ended elsewhere");
            }, f -> LOG.warnf("Background response %s: lease renewal failed: %s", run.id(), f.getMessage()));
        }

        @Override
        public void onSubscribe(Flow.Subscription s) {
            subscription = s;
            s.request(Long.MAX_VALUE);
        }

        @Override
        public void onItem(List<ResponseEvent> events) {
            if (ended.get()) return;
            synchronized (this) {
                pending.addAll(events);
            }
            write();
        }

        @Override
        public void onFailure(Throwable failure) {
            // ResponseRun turns failures into a response.failed event; this is the last resort
            LOG.error("Background response " + run.id() + " failed", failure);
            stop("failed", error("server_error", "The server had an error while generating; the generation was stopped."));
        }

        @Override
        public void onCompletion() {
            synchronized (this) {
                completed = true;
            }
            write();
        }

        /** Writes what is pending unless a write is in flight; once everything is written after the end, the run is done. */
        private void write() {
            List<ResponseEvent> batch;
            long first;
            Runnable then = null;
            synchronized (this) {
                if (writing) return;
                if (pending.isEmpty()) {
                    if (whenWritten != null) {
                        then = whenWritten;
                        whenWritten = null;
                    } else if (completed && !ended.get()) {
                        then = this::done;
                    }
                }
            }
            if (then != null) {
                then.run();
                return;
            }
            synchronized (this) {
                if (writing || broken || pending.isEmpty()) return;
                batch = new ArrayList<>(pending);
                pending.clear();
                first = nextSequence;
                nextSequence += batch.size();
                writing = true;
            }
            if (completed && run.endedElsewhere()) {
                // the run's end was written by someone else (a lapsed lease): its own terminal event must not follow
                batch.removeIf(ResponseEvent::terminal);
            }
            store.appendEvents(run.id(), first, batch.stream().map(ResponseEvent::data).toList()).subscribe().with(v -> {
                synchronized (this) {
                    writing = false;
                }
                write();
            }, f -> {
                Runnable end;
                synchronized (this) {
                    // no write starts after this one (events arriving now must not slip in before the end is asked for)
                    writing = false;
                    broken = true;
                    pending.clear();
                    end = whenWritten;
                    whenWritten = null;
                }
                LOG.warnf("Background response %s: its events could not be stored (%s); stopping it", run.id(), f.getMessage());
                if (end != null) {
                    end.run(); // an end asked for while this write was in flight (a cancel, a drain): it goes on now
                } else if (run.finishedHere()) {
                    done(); // its record is stored; only its last events are lost (followers end with the stored object)
                } else {
                    stop("failed", error("store_unavailable", "The conversation store failed while this background response ran."));
                }
            });
        }

        private void done() {
            if (!ended.compareAndSet(false, true)) return;
            finish();
        }

        private void finish() {
            ScheduledFuture<?> r = renewal;
            if (r != null) r.cancel(false);
            local.remove(run.id(), this);
        }

        private void abandon(String why) {
            if (!ended.compareAndSet(false, true)) return;
            LOG.infof("Background response %s: stopping, %s", run.id(), why);
            Flow.Subscription s = subscription;
            if (s != null) s.cancel();
            finish();
        }

        /** Stops the generation and ends the run with this status and what it had produced; completes once stored. */
        Uni<Void> stop(String status, ObjectNode error) {
            // a run whose end this replica already stored only has its last events to write: let it
            if (run.finishedHere() || !ended.compareAndSet(false, true)) return Uni.createFrom().voidItem();
            Flow.Subscription s = subscription;
            if (s != null) s.cancel();
            java.util.concurrent.CompletableFuture<Void> stored = new java.util.concurrent.CompletableFuture<>();
            Runnable end = () -> {
                StoredResponse last = run.interrupted(status, error);
                store.finishRun(last, terminalEvent("response.failed", last.response()), false).subscribe().with(won -> {
                    LOG.infof("Background response %s %s", run.id(), won ? "ended as " + status : "had already ended");
                    finish();
                    stored.complete(null);
                }, f -> {
                    LOG.warnf("Background response %s could not be marked %s: %s", run.id(), status, f.getMessage());
                    finish();
                    stored.complete(null);
                });
            };
            boolean now;
            synchronized (this) {
                // events already handed to the store go first, so the terminal event is numbered after them
                now = !writing;
                if (writing) whenWritten = end;
                else pending.clear();
            }
            if (now) end.run();
            return Uni.createFrom().completionStage(stored);
        }
    }
}
