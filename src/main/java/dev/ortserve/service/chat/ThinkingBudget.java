package dev.ortserve.service.chat;

import dev.ortserve.engine.TextTokenizer;
import dev.ortserve.engine.TokenConstraint;
import dev.ortserve.parse.ReasoningParser;

import java.util.Arrays;

/**
 * A reasoning budget enforced in tokens: once the model has written {@code budget} tokens of
 * reasoning without closing the block, the only token it may write next is the end-of-thinking
 * marker, so the answer follows. For {@code <think>...</think>} and {@code [THINK]...[/THINK]}
 * models whose markers are single tokens. Where the template opens the block (deepseek_r1) the
 * output starts inside it; otherwise the budget counts from the opening marker, and an output that
 * does not open with it (after blank tokens) is never touched.
 */
final class ThinkingBudget implements TokenConstraint {

    private final int budget;
    private final int open;
    private final int close;
    private final boolean openedByTemplate;
    private final TextTokenizer tokenizer;

    private ThinkingBudget(int budget, int open, int close, boolean openedByTemplate, TextTokenizer tokenizer) {
        this.budget = budget;
        this.open = open;
        this.close = close;
        this.openedByTemplate = openedByTemplate;
        this.tokenizer = tokenizer;
    }

    /** The budget for {@code parser}'s reasoning block; null when it has no markers or they are not single tokens of this vocabulary. */
    static ThinkingBudget of(ReasoningParser parser, int budget, TextTokenizer tokenizer) {
        ReasoningParser.BlockMarkers markers = parser.blockMarkers();
        if (markers == null) return null;
        Integer open = tokenizer.addedTokenId(markers.open());
        Integer close = tokenizer.addedTokenId(markers.close());
        if (open == null || close == null) return null;
        return new ThinkingBudget(budget, open, close, markers.openedByTemplate(), tokenizer);
    }

    @Override
    public State start() {
        return new State() {
            private boolean thinking = openedByTemplate;
            private boolean done;
            private int spent;

            @Override
            public void mask(float[] logits) {
                if (!thinking || done || spent < budget) return;
                float keep = logits[close];
                Arrays.fill(logits, Float.NEGATIVE_INFINITY);
                logits[close] = Float.isFinite(keep) ? keep : 0f;
            }

            @Override
            public void advance(int token) {
                if (done) return;
                if (!thinking) {
                    if (token == open) {
                        thinking = true;
                    } else if (!tokenizer.decode(new int[] {token}, false).isBlank()) {
                        done = true; // the output does not reason: nothing to budget
                    }
                    return;
                }
                if (token == close) {
                    done = true;
                } else {
                    spent++;
                }
            }
        };
    }
}
