package dev.ortserve.service;

import dev.ortserve.config.OrtserveConfig;
import io.quarkus.runtime.LaunchMode;
import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.StartupEvent;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;
import org.jboss.logging.Logger;
import sun.misc.Signal;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * SIGTERM drains before the JVM begins to shut down: readiness goes down and new API requests get
 * 503 at once, sequences already admitted (streams included) run to their end for up to
 * {@code ortserve.drain-timeout} (background responses included: those still running then are
 * stored as failed, {@code server_shutdown}), then the application exits normally.
 *
 * <p>Why not only Quarkus's graceful shutdown: the JVM runs all shutdown hooks at the same time,
 * and ONNX Runtime's Java binding registers one that releases the native environment, so a
 * generation still running when the hooks start would run on freed memory. Draining in the
 * signal handler means nothing is generating by the time any shutdown hook runs.
 */
@ApplicationScoped
public class ShutdownDrain {

    private static final Logger LOG = Logger.getLogger(ShutdownDrain.class);

    @Inject
    OrtserveConfig config;

    @Inject
    GenerationModelHost generation;

    @Inject
    dev.ortserve.service.responses.BackgroundRuns background;

    private final AtomicBoolean draining = new AtomicBoolean();
    private final List<Runnable> onDrain = new CopyOnWriteArrayList<>();

    void install(@Observes StartupEvent event) {
        if (LaunchMode.current() != LaunchMode.NORMAL) return; // tests and dev mode own their JVM's signals
        try {
            Signal.handle(new Signal("TERM"), signal -> drain());
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            LOG.warnf("Cannot handle SIGTERM (%s): shutdown will not drain in-flight generations", e.getMessage());
        }
    }

    /**
     * Runs {@code listener} when draining begins (on the signal's thread: hand real work to the
     * listener's own context). Connections that outlive a request, the Responses WebSockets, close
     * themselves with 1001 from it rather than being cut by the HTTP server's stop.
     */
    public void onDrain(Runnable listener) {
        onDrain.add(listener);
    }

    /** Whether the server is draining: no new work is accepted. */
    public boolean draining() {
        return draining.get();
    }

    void drain() {
        if (!draining.compareAndSet(false, true)) return;
        long timeout = config.drainTimeout().toMillis();
        LOG.infof("SIGTERM: draining for up to %d ms; new requests get 503", timeout);
        for (Runnable listener : onDrain) {
            try {
                listener.run();
            } catch (RuntimeException e) {
                LOG.warn("A drain listener failed", e);
            }
        }
        Thread waiter = new Thread(() -> {
            long deadline = System.currentTimeMillis() + timeout;
            while (System.currentTimeMillis() < deadline && busy()) {
                try {
                    Thread.sleep(50);
                } catch (InterruptedException e) {
                    break;
                }
            }
            LOG.infof("Drained (%s); shutting down", busy() ? "timeout reached with work left" : "no generation left");
            // background responses still running here would otherwise stay in_progress until their lease lapses
            background.failAll(config.storeTimeout().plusSeconds(1));
            Quarkus.asyncExit(0);
        }, "ortserve-drain");
        waiter.setDaemon(true);
        waiter.start();
    }

    private boolean busy() {
        return generation.busy() > 0;
    }
}
