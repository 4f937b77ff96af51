package dev.ortserve.engine.batching;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.EngineListener;
import dev.ortserve.engine.ForwardPass;
import dev.ortserve.engine.kv.PendingKv;
import dev.ortserve.engine.kv.PrefixCache;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * The passes of a graph whose attention runs as exported ({@link KvSteps}): a decode step's present tensors, the whole
 * past and the new position, become the batch's next past without a copy on our side ({@link KvCache#adopt}); a prefill
 * chunk's present becomes the sequence's pending KV.
 */
final class CopyingKvSteps extends KvSteps {

    CopyingKvSteps(DecoderSpec spec, OrtEnvironment env, DecoderRunner runner, KvCache kv, AtomicLong steps, Supplier<EngineListener> listener,
                   int maxSequences) {
        super(spec, env, runner, kv, steps, listener, maxSequences);
    }

    @Override
    List<Sequence> decode(List<Sequence> rows) throws OrtException {
        int b = rows.size();
        long started = System.nanoTime();
        List<ForwardPass.Row> in = new ArrayList<>(b);
        for (Sequence s : rows) in.add(ForwardPass.Row.decode(s.lastToken, s.length));
        ForwardPass pass = ForwardPass.of(spec.alignment(), in, kv.length(), kv.keys(), kv.values());
        long forwardStart = System.nanoTime();
        DecoderRunner.Forward out = runner.run(pass);
        long forward = System.nanoTime() - forwardStart;
        steps.incrementAndGet();
        kv.adopt(out, pass.totalLength());
        stepped(b, (long) b * pass.totalLength());
        takeLogits(out, rows, 0, b);
        decoded(b, forward, started);
        return rows;
    }

    @Override
    void prefillChunk(Sequence s, int n) throws OrtException {
        PendingKv past = s.pending;
        ForwardPass pass = ForwardPass.of(spec.alignment(), List.of(new ForwardPass.Row(s.prompt, s.length, n, s.length, s.images)), s.length,
                past == null ? null : past.keys, past == null ? null : past.values).withAdapter(s.adapter);
        DecoderRunner.Forward out = runner.run(pass);
        steps.incrementAndGet();
        s.closePending();
        s.pending = PendingKv.fromPresent(out, spec.layers(), 0, pass.totalLength(), new PendingKv.Holder(out, 1));
        s.length = pass.totalLength();
        promptDone(s, out, 0);
    }

    @Override
    PendingKv assemble(PrefixCache prefix, Sequence s, int reuse) throws OrtException {
        return prefix.assemble(s.hold, reuse);
    }

    @Override
    boolean rowsRunAlone() {
        return false;
    }
}
