package dev.ortserve.api.resource;

import dev.ortserve.api.generated.AdminApi;
import dev.ortserve.api.model.ModelAdminRequest;
import dev.ortserve.api.model.ModelAdminResponse;
import dev.ortserve.service.GenerationModelHost;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

/**
 * POST /models/load and /models/unload (llama.cpp router's endpoints), behind ORTSERVE_ADMIN_KEY (checked at the HTTP
 * edge): {@link GenerationModelHost} loads or unloads; the answer is the model's id and state.
 */
public class AdminResource implements AdminApi {

    @Inject
    GenerationModelHost host;

    @Override
    public Uni<Response> loadModel(ModelAdminRequest req) {
        host.requireModel(req.getModel());
        return host.load(req.getModel()).map(served -> answer(served.id()));
    }

    @Override
    public Uni<Response> unloadModel(ModelAdminRequest req) {
        host.requireModel(req.getModel());
        return host.unload(req.getModel()).map(this::answer);
    }

    private Response answer(String id) {
        return Response.ok(new ModelAdminResponse().success(true).model(id).status(ModelsResource.status(host.info(id)))).build();
    }
}
