package dev.ortserve.engine.batching;

import dev.ortserve.engine.PromptImages;
import dev.ortserve.engine.kv.PrefixCache;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.FinishReason;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenConstraint;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.TokenLogprob;

import dev.ortserve.engine.kv.PendingKv;
import dev.ortserve.engine.kv.PrefixCache;
import dev.ortserve.engine.sampling.StopStringMatcher;
import dev.ortserve.engine.sampling.TokenSampler;
import dev.ortserve.engine.speculative.Drafter;
import dev.ortserve.engine.speculative.SpeculativeOptions;

import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.operators.multi.processors.UnicastProcessor;

import java.util.Arrays;

/**
 * One sequence's life in the engine: sampling, detokenizing, stop strings and grammar on each new
 * token's logits, the events it emits, and what it holds of the KV (its own KV before it joins the
 * batch, the prefix-cache blocks it references). Everything but {@link #cancel()} runs on the
 * engine thread.
 */
final class Sequence {

    final GenerationRequest request;
    /** The LoRA adapter it runs with, or null (the base model). */
    final dev.ortserve.engine.LoraAdapter adapter;
    final int[] prompt;
    /** The features of its prompt's image tokens, or null. */
    final PromptImages images;
    final SamplingParams params;
    final long admittedAt = System.nanoTime();
    private final LoadedModel model;
    private final java.util.function.Consumer<Sequence> onLeave;
    private final java.util.function.Consumer<Sequence> onRetire;
    private final UnicastProcessor<TokenEvent> processor = UnicastProcessor.create();
    final Multi<TokenEvent> events;
    private final TokenSampler sampler;
    private final IncrementalDetokenizer detokenizer;
    private final StopStringMatcher stops;
    private final TokenConstraint.State constraint;
    private final int maxTokens;
    private volatile boolean cancelled;

    /** Tokens in this sequence's KV (the batch's row or its pending KV). */
    int length;
    /** The token the next decode step feeds. */
    int lastToken;
    int generated;
    /** The prompt and the generated tokens, {@code prompt.length + generated} of them. */
    private int[] history;
    /** Where draft tokens come from (speculative decoding), or null: none. */
    final Drafter drafter;
    private boolean finished;
    private boolean left;
    private boolean retired;
    /** The KV before joining the batch; null once joined (or before prefill). */
    PendingKv pending;
    /** Prefix-cache blocks this sequence references (reused or written); null when the cache is off. */
    PrefixCache.Hold hold;
    /** Prompt tokens whose KV came from the prefix cache. */
    int cachedTokens;

    /**
     * Positions the scheduler counted this sequence's batch row at when it left the queue ({@link #maxPositions}; 0 before
     * and once it is retired). Engine thread.
     */
    int rowPositions;
    /** KV bytes reserved for this sequence's KV in the draft model while it holds one (given back when it lets go of it). */
    long draftReserved;

    /**
     * @param onLeave  once, when it gives its running slot back (its last token, or retired)
     * @param onRetire once, when it has left the engine and let go of its KV (engine thread)
     */
    Sequence(GenerationRequest request, LoadedModel model, java.util.function.Consumer<Sequence> onLeave,
             java.util.function.Consumer<Sequence> onRetire) {
        this(request, model, SpeculativeOptions.OFF, s -> null, onLeave, onRetire);
    }

    /**
     * @param speculative how this sequence drafts tokens (with its request's predicted output, if any)
     * @param draftModel  a draft model's state for this sequence, or null when there is no draft model
     */
    Sequence(GenerationRequest request, LoadedModel model, SpeculativeOptions speculative,
             java.util.function.Function<Sequence, Drafter.Source> draftModel, java.util.function.Consumer<Sequence> onLeave,
             java.util.function.Consumer<Sequence> onRetire) {
        DecoderSpec spec = model.spec();
        this.request = request;
        this.adapter = request.adapter();
        this.model = model;
        this.onLeave = onLeave;
        this.onRetire = onRetire;
        this.prompt = request.promptTokenIds();
        this.images = request.images();
        this.history = Arrays.copyOf(prompt, prompt.length + 16);
        this.params = request.sampling();
        this.sampler = new TokenSampler(params, spec.eosIds(), spec.vocabSize(), prompt);
        this.detokenizer = new IncrementalDetokenizer(model.tokenizer(), prompt, params.skipSpecialTokens());
        this.stops = new StopStringMatcher(params.stop(), params.includeStopStrInOutput());
        this.constraint = params.constraint() == null ? null : params.constraint().start();
        this.maxTokens = Math.max(0, Math.min(params.maxTokens(), spec.maxModelLen() - prompt.length));
        this.events = processor.onCancellation().invoke(() -> cancelled = true);
        this.drafter = Drafter.of(speculative, request.prediction(), () -> draftModel.apply(this));
    }

    boolean cancelled() {
        return cancelled;
    }

    boolean done() {
        return finished || cancelled;
    }

    /** The first {@code count} tokens of the sequence. */
    int[] tokens(int count) {
        return Arrays.copyOf(history, count);
    }

    /**
     * Draft tokens to verify after {@link #lastToken}, at most {@code limit} (and no more than this sequence may still
     * generate less one: the verification adds one token of its own); empty for none.
     */
    int[] draft(int limit) {
        if (drafter == null || done()) return new int[0];
        int k = Math.min(limit, maxTokens - generated - 1);
        return k <= 0 ? new int[0] : drafter.propose(history, prompt.length, prompt.length + generated, k);
    }

    /**
     * A verification pass of this sequence's own (its row 0) fed {@link #lastToken} and {@code draft}: the logits of its {@code draft.length + 1} columns
     * give one token each, sampled as a decode step would ({@link #onLogits}: the same processors, grammar and random
     * draws, so the output is the one decoding without a draft gives), while each sampled token is the drafted one.
     * Returns the tokens emitted: the positions of the pass that stay valid in the KV.
     */
    int verify(DecoderRunner.Forward out, int[] draft, float[] logits) {
        int emitted = 0, taken = 0;
        for (int i = 0; i <= draft.length && !done(); i++) {
            out.logits(0, i, logits);
            onLogits(logits);
            emitted++;
            if (i == draft.length || lastToken != draft[i]) break;
            taken++;
        }
        // a draft token stopped short by the sequence's end (EOS, a stop, max_tokens) was never checked against the model
        if (draft.length > 0) drafter.verified(Math.min(draft.length, emitted), taken);
        return emitted;
    }
    /** The model's logits for this sequence's next token. */
    void onLogits(float[] logits) {
        if (done()) return;
        DecoderSpec spec = model.spec();
        if (constraint != null) constraint.mask(logits);
        TokenSampler.Choice choice = sampler.next(logits, model.tokenizer());
        int token = choice.tokenId();
        if (prompt.length + generated == history.length) history = Arrays.copyOf(history, history.length * 2);
        history[prompt.length + generated++] = token;
        lastToken = token;
        // under a grammar, end-of-sequence always ends the output: it is only allowed once the value is complete
        boolean eos = spec.eosIds().contains(token) && (!params.ignoreEos() || constraint != null);
        if (constraint != null && !eos) constraint.advance(token);
        boolean stopToken = params.stopTokenIds().contains(token);
        if (eos || stopToken) {
            // an incomplete character held back at the end is given as transformers decodes it (U+FFFD)
            String rest = stops.append(detokenizer.flush());
            if (stops.matchedStop() != null) {
                emit(token, rest, choice.logprob(), FinishReason.STOP, stops.matchedStop());
                return;
            }
            emit(token, rest + stops.flush(), choice.logprob(), FinishReason.STOP, stopToken && !eos ? Integer.valueOf(token) : null);
            return;
        }
        String text = stops.append(detokenizer.add(token));
        if (generated >= maxTokens && stops.matchedStop() == null) text += stops.append(detokenizer.flush());
        if (stops.matchedStop() != null) {
            emit(token, text, choice.logprob(), FinishReason.STOP, stops.matchedStop());
            return;
        }
        if (generated >= maxTokens) {
            emit(token, text + stops.flush(), choice.logprob(), FinishReason.LENGTH, null);
            return;
        }
        emit(token, text, choice.logprob(), null, null);
    }

    private void emit(int token, String text, TokenLogprob logprob, FinishReason finish, Object stopReason) {
        processor.onNext(new TokenEvent(token, text, logprob, finish, stopReason, prompt.length, generated, cachedTokens,
                drafter == null ? TokenEvent.Drafts.NONE : new TokenEvent.Drafts(drafter.predicted(), drafter.drafted(), drafter.accepted())));
        if (finish != null) {
            finished = true;
            leave();
            processor.onComplete();
        }
    }

    /** Gives the sequence's slot back in the running count, once. */
    void leave() {
        if (!left) {
            left = true;
            onLeave.accept(this);
        }
    }

    /** Positions of KV this sequence may come to hold: its prompt and every token it may generate (within the context). */
    int maxPositions() {
        return prompt.length + maxTokens;
    }

    void finish() {
        if (!finished) {
            finished = true;
            processor.onComplete();
        }
    }

    void fail(Throwable e) {
        if (!finished) {
            finished = true;
            processor.onError(e);
        }
    }

    /** Frees the pending KV (if any); the prefix-cache blocks stay referenced. */
    void closePending() {
        if (pending != null) {
            pending.close();
            pending = null;
        }
    }

    /** Lets go of everything this sequence holds of the KV: its pending KV and its prefix-cache blocks. */
    void releaseKv() {
        closePending();
        if (drafter != null) drafter.close();
        if (hold != null) {
            hold.release();
            hold = null;
        }
    }

    /**
     * Removes the sequence from the engine: releases its KV and its running slot, then its KV
     * reservation ({@code onRetire}, once): the reservation covers its KV, prefix-cache blocks
     * included, until it has really let go of them.
     */
    void retire() {
        releaseKv();
        leave();
        if (!retired) {
            retired = true;
            onRetire.accept(this);
        }
    }

    /** Its LoRA adapter's key (0: the base model): the order of the batch's rows. */
    int adapterKey() {
        return adapter == null ? 0 : adapter.key();
    }

    /** The root of its prefix-cache chain: its adapter's, or, with images, one of its images' content and adapter. */
    long prefixRoot() {
        return images == null ? PrefixCache.root(adapterKey()) : images.prefixRoot(adapterKey());
    }
}
