package dev.ortserve.bench;

import dev.ortserve.parse.ChatDeltaStream;
import dev.ortserve.parse.OutputParsers;
import dev.ortserve.parse.Parsers;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What streaming a tool call costs per token: a hermes call of 2k, 8k and 32k characters (with the
 * qwen3 reasoning parser, as Qwen3 gets) fed to {@link ChatDeltaStream} in 4-character chunks.
 * Each chunk re-reads the call from its start, so the cost per chunk grows with the call. Run with
 * {@code ./mvnw -Pbench test -Dtest=ToolCallStreamBenchmark}.
 */
@Tag("bench")
class ToolCallStreamBenchmark {

    @Test
    void costPerChunkByCallLength() {
        for (int chars : new int[] {2_000, 8_000, 32_000}) {
            StringBuilder q = new StringBuilder();
            while (q.length() < chars) q.append("word ");
            String text = "Sure.\n<tool_call>\n{\"name\": \"search_docs\", \"arguments\": {\"query\": \"" + q + "\"}}\n</tool_call>";
            double best = Double.MAX_VALUE;
            int deltas = 0;
            for (int round = 0; round < 5; round++) {
                long t0 = System.nanoTime();
                ChatDeltaStream s = new ChatDeltaStream(new OutputParsers(Parsers.reasoning("qwen3"), Parsers.toolCalls("hermes"), Map.of()));
                deltas = 0;
                int chunks = 0;
                for (int i = 0; i < text.length(); i += 4) {
                    deltas += s.add(text.substring(i, Math.min(text.length(), i + 4)), i + 4 >= text.length()).size();
                    chunks++;
                }
                best = Math.min(best, (System.nanoTime() - t0) / 1_000.0 / chunks);
            }
            System.out.printf("tool-call stream: %d-char call, %d chunks of 4 chars: best %.1f us per chunk, %d deltas%n",
                    text.length(), (text.length() + 3) / 4, best, deltas);
            assertTrue(deltas > text.length() / 8);
        }
    }
}
