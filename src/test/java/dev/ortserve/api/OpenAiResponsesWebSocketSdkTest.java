package dev.ortserve.api;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.http.ResponseConnection;
import com.openai.models.responses.Response;
import com.openai.models.responses.ResponsesClientEvent;
import com.openai.models.responses.ResponsesServerEvent;
import dev.ortserve.ApiTest;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import java.net.URL;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** openai-java's Responses WebSocket client (client.responses().connect()) against WebSocket mode. */
@QuarkusTest
class OpenAiResponsesWebSocketSdkTest extends ApiTest {

    @TestHTTPResource
    URL base;

    OpenAIClient client() {
        return OpenAIOkHttpClient.builder().baseUrl(base.toString().replaceAll("/$", "") + "/v1").apiKey("unused").maxRetries(0)
                .responseValidation(true).build();
    }

    /** Reads events to the end of one response; every event must parse (and validate) as the SDK's types. */
    static Response turn(ResponseConnection connection, ResponsesClientEvent.ResponseCreate create, StringBuilder deltas) {
        connection.send(ResponsesClientEvent.ofResponseCreate(create));
        while (true) {
            ResponsesServerEvent event = connection.receive();
            event.validate();
            assertFalse(event.isError(), () -> "error event: " + event);
            if (event.isResponseOutputTextDelta()) deltas.append(event.asResponseOutputTextDelta().delta());
            if (event.isResponseCompleted()) return event.asResponseCompleted().response();
            if (event.isResponseIncomplete()) return event.asResponseIncomplete().response();
            assertFalse(event.isResponseFailed(), () -> "failed: " + event);
        }
    }

    @Test
    void threeTurnsWithStoreFalseOverTheSdksWebSocket() {
        try (ResponseConnection connection = client().responses().connect()) {
            String previous = null;
            int lastInput = 0;
            for (String input : new String[] {"My name is Ada.", "What is my name?", "Say it again."}) {
                ResponsesClientEvent.ResponseCreate.Builder create = ResponsesClientEvent.ResponseCreate.builder().model(MODEL).input(input)
                        .store(false).temperature(0).maxOutputTokens(5L);
                if (previous != null) create.previousResponseId(previous);
                StringBuilder deltas = new StringBuilder();
                Response r = turn(connection, create.build(), deltas);
                assertEquals(previous, r.previousResponseId().orElse(null));
                assertEquals(false, r._additionalProperties().get("store").asBoolean().orElseThrow());
                String text = r.output().stream().filter(i -> i.isMessage()).flatMap(i -> i.asMessage().content().stream())
                        .map(c -> c.asOutputText().text()).reduce("", String::concat);
                assertEquals(deltas.toString(), text);
                long inputTokens = r.usage().orElseThrow().inputTokens();
                // each turn's prompt holds the earlier turns: it grows past the previous prompt
                assertTrue(inputTokens > lastInput, inputTokens + " after " + lastInput);
                lastInput = (int) inputTokens;
                previous = r.id();
            }
        }
    }
}
