package dev.ortserve.api;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineListener;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Holds the engine thread after its first decode step until closed, so that a test acts at a known
 * point of a generation (the tiny model decodes thousands of tokens a second: no race left to win).
 * Closing releases the engine and puts {@code restore} back as its listener.
 */
final class EngineHold implements AutoCloseable {

    private final ContinuousBatchingEngine engine;
    private final EngineListener restore;
    private final CountDownLatch held = new CountDownLatch(1);
    private final CountDownLatch release = new CountDownLatch(1);

    EngineHold(ContinuousBatchingEngine engine, EngineListener restore) {
        this.engine = engine;
        this.restore = restore;
        engine.listener(new EngineListener() {
            @Override
            public void decoded(int rows, long forwardNanos, long stepNanos) {
                held.countDown();
                try {
                    release.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
    }

    /** Waits until the engine is held after a decode step. */
    boolean awaitHeld() throws InterruptedException {
        return held.await(30, TimeUnit.SECONDS);
    }

    @Override
    public void close() {
        engine.listener(restore);
        release.countDown();
    }
}
