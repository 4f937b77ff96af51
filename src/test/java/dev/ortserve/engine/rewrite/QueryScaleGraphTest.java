package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.NodeProto;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * QueryScale on the real builder export's graph (packed QKV, scale 0.25, head size only in genai_config.json): it moves
 * every node's scale once; a graph already at scale 1 is left as it is (no second Mul), with the reason.
 */
class QueryScaleGraphTest {

    @Test
    void theScaleMovesOnceAndAGraphAtScaleOneIsLeftAlone() throws Exception {
        Path dir = Path.of("src/test/resources/fixtures/builder-llama/fp32");
        Graph g = new Graph(OnnxModelFile.read(dir.resolve("model.onnx")), dir);
        int nodes = g.graph.getNodeCount();
        assertEquals(new QueryScale.Outcome(2, null), QueryScale.apply(g));
        assertEquals(nodes + 2, g.graph.getNodeCount(), "one Mul per GroupQueryAttention");
        for (int i : g.nodesOf("com.microsoft", "GroupQueryAttention")) {
            NodeProto n = g.graph.getNode(i);
            assertEquals("Mul", g.graph.getNode(g.producerIndex(n.getInput(0))).getOpType(), n.getName());
        }
        assertEquals(new QueryScale.Outcome(0, "every GroupQueryAttention runs at scale 1 already"), QueryScale.apply(g));
        assertEquals(nodes + 2, g.graph.getNodeCount());
        assertEquals(16, QueryScale.configHeadSize(g, 4), "genai_config.json's head_size");
    }
}
