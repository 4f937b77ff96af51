package dev.ortserve.contract;

import com.atlassian.oai.validator.OpenApiInteractionValidator;
import com.atlassian.oai.validator.model.Request;
import com.atlassian.oai.validator.model.SimpleResponse;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Validates a text/event-stream body: each frame's `data:` JSON against the schema the contract
 * gives the operation's event-stream response, and the frame grammar itself (`event:` lines
 * must name the payload's `type`; `[DONE]` only as the last frame).
 */
final class SseFrameValidator {

    private final OpenApiInteractionValidator validator;

    SseFrameValidator(Path contract) {
        this.validator = OpenApiInteractionValidator.createForSpecificationUrl(contract.toAbsolutePath().toUri().toString()).build();
    }

    List<String> validate(String path, Request.Method method, int status, String body) {
        List<String> problems = new ArrayList<>();
        List<SseFrames.Frame> frames = SseFrames.parse(body);
        for (int i = 0; i < frames.size(); i++) {
            SseFrames.Frame frame = frames.get(i);
            if (frame.data() == null) {
                problems.add("sse: frame " + i + " has no data line");
                continue;
            }
            if (frame.data().equals("[DONE]")) {
                if (i != frames.size() - 1) {
                    problems.add("sse: [DONE] is not the last frame");
                }
                continue;
            }
            SimpleResponse response = SimpleResponse.Builder.status(status)
                    .withContentType("text/event-stream")
                    .withBody(frame.data()).build();
            for (String m : ContractValidationFilter.messages("sse frame " + i, validator.validateResponse(path, method, response))) {
                problems.add(m + " in " + ContractValidationFilter.abbreviate(frame.data()));
            }
            if (frame.event() != null && !frame.data().contains("\"type\":\"" + frame.event() + "\"")) {
                problems.add("sse: frame " + i + " event '" + frame.event() + "' does not match its payload type");
            }
        }
        return problems;
    }
}
