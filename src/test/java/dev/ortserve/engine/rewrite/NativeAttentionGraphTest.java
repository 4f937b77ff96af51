package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.OperatorSetIdProto;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * NativeAttention on the real builder export's graph (packed QKV, rotary inside the op, 12 inputs with the unused
 * trailing ones empty): every GroupQueryAttention moves to the dev.ortserve domain with 9 inputs and 3 outputs, and the
 * domain's opset is imported; a graph with one node the library does not compute (an attention bias, an attribute it
 * does not read set) is left entirely as it is, with the reason.
 */
class NativeAttentionGraphTest {

    private static final Path DIR = Path.of("src/test/resources/fixtures/builder-llama/fp32");

    @Test
    void everyNodeMovesWithItsUnusedInputsDropped() throws Exception {
        Graph g = new Graph(OnnxModelFile.read(DIR.resolve("model.onnx")), DIR);
        List<Integer> nodes = g.nodesOf("com.microsoft", "GroupQueryAttention");
        List<String> inputs = g.graph.getNode(nodes.get(0)).getInputList();
        assertTrue(inputs.size() > 9 && inputs.subList(9, inputs.size()).stream().allMatch(String::isEmpty), "the builder's trailing inputs: " + inputs);
        assertEquals(new NativeAttention.Outcome(2, null), NativeAttention.apply(g));
        assertTrue(g.nodesOf("com.microsoft", "GroupQueryAttention").isEmpty());
        for (int i : g.nodesOf(NativeAttention.DOMAIN, "GroupQueryAttention")) {
            NodeProto n = g.graph.getNode(i);
            assertEquals(inputs.subList(0, 9).size(), n.getInputCount(), n.getName());
            assertEquals(3, n.getOutputCount(), n.getName());
        }
        assertTrue(g.model.getOpsetImportList().stream().map(OperatorSetIdProto::getDomain).anyMatch(NativeAttention.DOMAIN::equals));
    }

    @Test
    void oneNodeTheLibraryDoesNotComputeLeavesTheGraphAsItIs() throws Exception {
        Graph bias = new Graph(OnnxModelFile.read(DIR.resolve("model.onnx")), DIR);
        int first = bias.nodesOf("com.microsoft", "GroupQueryAttention").get(0);
        NodeProto n = bias.graph.getNode(first);
        bias.graph.setNode(first, n.toBuilder().setInput(10, n.getInput(0)));
        NativeAttention.Outcome o = NativeAttention.apply(bias);
        assertEquals(0, o.nodes());
        assertTrue(o.reason().contains("attention bias"), o.reason());
        assertEquals(2, bias.nodesOf("com.microsoft", "GroupQueryAttention").size(), "nothing moved");

        Graph smooth = new Graph(OnnxModelFile.read(DIR.resolve("model.onnx")), DIR);
        int last = smooth.nodesOf("com.microsoft", "GroupQueryAttention").get(1);
        smooth.graph.setNode(last, smooth.graph.getNode(last).toBuilder()
                .addAttribute(AttributeProto.newBuilder().setName("smooth_softmax").setType(AttributeProto.AttributeType.INT).setI(1)));
        o = NativeAttention.apply(smooth);
        assertEquals(0, o.nodes());
        assertTrue(o.reason().contains("smooth_softmax"), o.reason());
        assertEquals(2, smooth.nodesOf("com.microsoft", "GroupQueryAttention").size(), "nothing moved");
    }
}
