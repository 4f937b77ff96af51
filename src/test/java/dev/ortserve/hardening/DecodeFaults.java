package dev.ortserve.hardening;

import dev.ortserve.engine.DecoderRunner;
import jakarta.inject.Singleton;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * Fault injection through the engine's runner seam, for resilience tests: once armed, the next
 * batched decode step that holds at least {@code minRows} sequences is given a token id past the
 * embedding table, so ONNX Runtime itself fails that step (a real OrtException, not a simulated
 * one). Armed before the requests start, it does not depend on timing. Disarmed, it passes every
 * pass through unchanged (it wraps the engine of every test application).
 */
@Singleton
public class DecodeFaults implements DecoderRunner.Decorator {

    private final AtomicInteger armedAtRows = new AtomicInteger();

    public void arm(int minRows) {
        armedAtRows.set(Math.max(0, minRows));
    }

    public void disarm() {
        armedAtRows.set(0);
    }

    @Override
    public DecoderRunner decorate(DecoderRunner runner) {
        return pass -> {
            int rows = armedAtRows.get();
            boolean decode = pass.newLength() == 1 && pass.pastLength() > 0;
            if (rows > 0 && decode && pass.batch() >= rows && armedAtRows.compareAndSet(rows, 0)) {
                pass.ids()[0] = Integer.MAX_VALUE;
            }
            return runner.run(pass);
        };
    }
}
