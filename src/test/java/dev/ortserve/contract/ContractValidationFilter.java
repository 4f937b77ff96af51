package dev.ortserve.contract;

import com.atlassian.oai.validator.OpenApiInteractionValidator;
import com.atlassian.oai.validator.model.Request;
import com.atlassian.oai.validator.model.SimpleRequest;
import com.atlassian.oai.validator.model.SimpleResponse;
import com.atlassian.oai.validator.report.ValidationReport;
import io.restassured.filter.FilterContext;
import io.restassured.filter.OrderedFilter;
import io.restassured.response.Response;
import io.restassured.specification.FilterableRequestSpecification;
import io.restassured.specification.FilterableResponseSpecification;

import java.net.URI;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Locale;

/**
 * The conformance harness: every REST Assured exchange is checked against
 * openapi/openapi.yaml. Responses are always validated (JSON bodies against their schema,
 * SSE bodies frame by frame against the event-stream schema); requests are validated when the
 * server accepted them (2xx), so a request the server takes must be one the contract allows.
 * Any violation fails the test that made the call.
 */
public final class ContractValidationFilter implements OrderedFilter {

    public static final Path CONTRACT = Path.of("openapi/openapi.yaml");

    private static volatile ContractValidationFilter instance;

    private final OpenApiInteractionValidator validator;
    private final SseFrameValidator sse;

    private ContractValidationFilter() {
        String spec = CONTRACT.toAbsolutePath().toUri().toString();
        this.validator = OpenApiInteractionValidator.createForSpecificationUrl(spec).build();
        this.sse = new SseFrameValidator(CONTRACT);
    }

    public static ContractValidationFilter get() {
        if (instance == null) {
            synchronized (ContractValidationFilter.class) {
                if (instance == null) {
                    instance = new ContractValidationFilter();
                }
            }
        }
        return instance;
    }

    /** Problems of an event-stream body answered by {@code method path}, frame by frame; empty when it conforms. */
    public List<String> validateStream(String method, String path, String body) {
        return sse.validate(path, Request.Method.valueOf(method), 200, body);
    }

    public OpenApiInteractionValidator validator() {
        return validator;
    }

    @Override
    public int getOrder() {
        return OrderedFilter.HIGHEST_PRECEDENCE;
    }

    @Override
    public Response filter(FilterableRequestSpecification req, FilterableResponseSpecification resSpec, FilterContext ctx) {
        Response response = ctx.next(req, resSpec);
        String path = URI.create(req.getURI()).getRawPath();
        Request.Method method = Request.Method.valueOf(req.getMethod().toUpperCase(Locale.ROOT));
        if (!isContractPath(path)) {
            return response;
        }
        List<String> problems = new ArrayList<>();
        String contentType = response.getContentType() == null ? "" : response.getContentType();
        if (contentType.startsWith("text/event-stream")) {
            problems.addAll(sse.validate(path, method, response.getStatusCode(), response.asString()));
        } else {
            SimpleResponse.Builder rb = SimpleResponse.Builder.status(response.getStatusCode())
                    .withBody(response.asString());
            response.getHeaders().forEach(h -> rb.withHeader(h.getName(), h.getValue()));
            ValidationReport report = validator.validateResponse(path, method, rb.build());
            problems.addAll(messages("response", report));
        }
        if (response.getStatusCode() / 100 == 2) {
            SimpleRequest.Builder qb = new SimpleRequest.Builder(method, path);
            if (req.getBody() != null) {
                qb.withBody(req.getBody() instanceof byte[] b ? new String(b, java.nio.charset.StandardCharsets.UTF_8) : String.valueOf((Object) req.getBody()));
            }
            req.getHeaders().forEach(h -> qb.withHeader(h.getName(), h.getValue()));
            req.getQueryParams().forEach((k, v) -> qb.withQueryParam(k, String.valueOf(v)));
            ValidationReport report = validator.validateRequest(qb.build());
            problems.addAll(messages("request", report));
        }
        if (!problems.isEmpty()) {
            throw new AssertionError("Contract violation on " + method + " " + path + " (status "
                    + response.getStatusCode() + "):\n  " + String.join("\n  ", problems)
                    + "\nbody: " + abbreviate(response.asString()));
        }
        return response;
    }

    /**
     * The contract problems of one exchange seen from outside RestAssured (e.g. by {@link ContractProxy}):
     * the response always, the request when it was accepted (2xx).
     */
    public List<String> check(String method, String path, Map<String, String> query, Map<String, String> requestHeaders, String requestBody,
                              int status, Map<String, String> responseHeaders, String responseBody) {
        List<String> problems = new ArrayList<>();
        if (!isContractPath(path)) return problems;
        Request.Method m = Request.Method.valueOf(method.toUpperCase(Locale.ROOT));
        String contentType = responseHeaders.getOrDefault("content-type", "");
        if (contentType.startsWith("text/event-stream")) {
            problems.addAll(sse.validate(path, m, status, responseBody));
        } else {
            SimpleResponse.Builder rb = SimpleResponse.Builder.status(status).withBody(responseBody);
            responseHeaders.forEach(rb::withHeader);
            problems.addAll(messages("response", validator.validateResponse(path, m, rb.build())));
        }
        if (status / 100 == 2) {
            SimpleRequest.Builder qb = new SimpleRequest.Builder(m, path);
            if (requestBody != null && !requestBody.isEmpty()) qb.withBody(requestBody);
            requestHeaders.forEach(qb::withHeader);
            query.forEach(qb::withQueryParam);
            problems.addAll(messages("request", validator.validateRequest(qb.build())));
        }
        return problems;
    }

    static boolean isContractPath(String path) {
        return path.startsWith("/v1/") || path.equals("/tokenize") || path.equals("/detokenize");
    }

    static List<String> messages(String side, ValidationReport report) {
        List<String> out = new ArrayList<>();
        for (ValidationReport.Message m : report.getMessages()) {
            // Routes and methods outside the contract (tests of 404/405 handling) have nothing to validate against.
            if (m.getKey().equals("validation.request.path.missing") || m.getKey().equals("validation.request.operation.notAllowed")) {
                continue;
            }
            if (m.getLevel() == ValidationReport.Level.ERROR) {
                out.add(side + ": " + m.getKey() + ": " + m.getMessage());
            }
        }
        return out;
    }

    static String abbreviate(String s) {
        return s.length() > 2000 ? s.substring(0, 2000) + "..." : s;
    }
}
