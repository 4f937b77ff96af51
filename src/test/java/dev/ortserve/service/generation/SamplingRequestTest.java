package dev.ortserve.service.generation;

import ai.onnxruntime.OnnxJavaType;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.ModelLayout;
import dev.ortserve.service.error.InvalidRequestException;
import org.junit.jupiter.api.Test;

import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** The generation cap a request resolves to: its own, the context's rest, and generation_config.json's max_new_tokens (vLLM's min of the three). */
class SamplingRequestTest {

    static DecoderSpec spec(Integer maxNewTokens) {
        return new DecoderSpec(ModelLayout.OPTIMUM, "input_ids", "attention_mask", "position_ids", null,
                "past_key_values.%d.key", "past_key_values.%d.value", "logits", "present.%d.key", "present.%d.value",
                2, 2, 4, 100, 128, OnnxJavaType.FLOAT, Set.of(), null, new DecoderSpec.Defaults(null, null, null, null, maxNewTokens));
    }

    static int cap(Integer requested, Integer maxNewTokens, int prompt) {
        return SamplingRequest.builder().maxTokens(requested, "max_tokens").build().resolve(spec(maxNewTokens), prompt).maxTokens();
    }

    @Test
    void theModelsMaxNewTokensCapsEveryRequest() {
        assertEquals(100, cap(null, null, 28), "no cap anywhere: the context's rest");
        assertEquals(16, cap(16, null, 28), "the request's own");
        assertEquals(32, cap(null, 32, 28), "left out: the model's max_new_tokens");
        assertEquals(32, cap(90, 32, 28), "asked for more: the model's max_new_tokens");
        assertEquals(8, cap(8, 32, 28), "asked for less: the request's");
        assertEquals(10, cap(null, 32, 118), "the context's rest when it is smaller");
        // a request over the context is still the client's error, whatever the cap
        assertThrows(InvalidRequestException.class, () -> cap(120, 32, 28));
    }

    @Test
    void minTokensAboveTheCapIsRefused() {
        InvalidRequestException e = assertThrows(InvalidRequestException.class, () -> SamplingRequest.builder().minTokens(40).build()
                .resolve(spec(32), 10));
        assertEquals("min_tokens", e.param());
    }
}
