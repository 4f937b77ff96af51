package dev.ortserve.api.resource;

import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.generated.ResponsesApi;
import dev.ortserve.api.http.HttpEdgeRoutes;
import dev.ortserve.api.http.SseWriter;
import dev.ortserve.wire.model.CompactResponseRequest;
import dev.ortserve.wire.model.CreateResponseRequest;
import dev.ortserve.wire.model.Includable;
import dev.ortserve.protocol.openai.responses.ResponseCompaction;
import dev.ortserve.protocol.openai.responses.ResponsesService;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerRequest;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.Response;

import java.util.List;

/** The Responses API: HTTP in and out; everything else is {@link ResponsesService}. */
public class ResponsesResource implements ResponsesApi {

    @Inject
    ResponsesService responses;

    @Inject
    ResponseCompaction compaction;

    @Inject
    HttpEdgeRoutes edge;

    @Context
    HttpServerRequest http;

    @Override
    public Uni<Response> createResponse(CreateResponseRequest req) {
        boolean stream = Boolean.TRUE.equals(req.getStream());
        String owner = edge.ownerOf(http);
        if (Boolean.TRUE.equals(req.getBackground())) {
            return responses.start(req, owner).flatMap(responses::startBackground).flatMap(queued -> stream
                    ? responses.follow(queued.path("id").asText(), owner, -1).flatMap(events -> SseWriter.stream(http.response(), events.map(SseWriter::frames)))
                    : Uni.createFrom().item(Response.ok(queued).build()));
        }
        return responses.start(req, owner).flatMap(run -> stream
                ? SseWriter.stream(http.response(), run.events(true).map(SseWriter::frames)) // headers with the first token: a refusal is a status
                : run.complete().map(r -> Response.ok(r).build()));
    }

    @Override
    public Uni<Response> compactResponse(CompactResponseRequest req) {
        return compaction.compact(req, edge.ownerOf(http)).map(r -> Response.ok(r).build());
    }

    @Override
    public Uni<Response> getResponse(String responseId, List<Includable> include, Boolean stream, Long startingAfter) {
        checkInclude(include);
        String owner = edge.ownerOf(http);
        if (Boolean.TRUE.equals(stream)) {
            return responses.follow(responseId, owner, startingAfter == null ? -1 : startingAfter)
                    .flatMap(events -> SseWriter.stream(http.response(), events.map(SseWriter::frames)));
        }
        if (startingAfter != null) {
            throw ApiException.invalidRequest("starting_after", "'starting_after' applies to a stream: add 'stream=true'.");
        }
        return responses.get(responseId, owner).map(r -> Response.ok(r).build());
    }

    @Override
    public Uni<Response> deleteResponse(String responseId) {
        return responses.delete(responseId, edge.ownerOf(http)).map(r -> Response.ok(r).build());
    }

    @Override
    public Uni<Response> listInputItems(String responseId, Integer limit, String order, String after, String before, List<Includable> include) {
        checkInclude(include);
        return responses.inputItems(responseId, edge.ownerOf(http), limit, order, after, before).map(r -> Response.ok(r).build());
    }

    @Override
    public Uni<Response> cancelResponse(String responseId) {
        return responses.cancel(responseId, edge.ownerOf(http)).map(r -> Response.ok(r).build());
    }

    private static void checkInclude(List<Includable> include) {
        if (include == null) return;
        for (int i = 0; i < include.size(); i++) {
            if (include.get(i) == null) {
                throw ApiException.invalidRequest("include[" + i + "]", "'include' values must be one of: message.output_text.logprobs, reasoning.encrypted_content.");
            }
        }
    }
}
