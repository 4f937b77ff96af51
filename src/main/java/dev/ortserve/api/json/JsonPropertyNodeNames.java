package dev.ortserve.api.json;

import com.fasterxml.jackson.annotation.JsonProperty;
import io.quarkus.hibernate.validator.ValidatorFactoryCustomizer;
import jakarta.enterprise.context.ApplicationScoped;
import org.hibernate.validator.BaseHibernateValidatorConfiguration;
import org.hibernate.validator.spi.nodenameprovider.JavaBeanProperty;
import org.hibernate.validator.spi.nodenameprovider.Property;
import org.hibernate.validator.spi.nodenameprovider.PropertyNodeNameProvider;

import java.lang.reflect.Field;
import java.lang.reflect.Method;

/**
 * Bean Validation reports Java property names (`maxTokens`); clients know the JSON names
 * (`max_tokens`). This names violation paths after the DTOs' {@link JsonProperty} so the
 * error's `param` is the field the client sent.
 */
@ApplicationScoped
public class JsonPropertyNodeNames implements PropertyNodeNameProvider, ValidatorFactoryCustomizer {

    @Override
    public void customize(BaseHibernateValidatorConfiguration<?> configuration) {
        configuration.propertyNodeNameProvider(this);
    }

    @Override
    public String getName(Property property) {
        if (property instanceof JavaBeanProperty bean) {
            String json = jsonName(bean.getDeclaringClass(), bean.getName());
            if (json != null) {
                return json;
            }
        }
        return property.getName();
    }

    private static String jsonName(Class<?> type, String javaName) {
        for (Class<?> c = type; c != null && c != Object.class; c = c.getSuperclass()) {
            try {
                Field field = c.getDeclaredField(javaName);
                JsonProperty p = field.getAnnotation(JsonProperty.class);
                if (p != null && !p.value().isEmpty()) {
                    return p.value();
                }
            } catch (NoSuchFieldException ignored) {
                // try the getter below, then the superclass
            }
            String getter = "get" + Character.toUpperCase(javaName.charAt(0)) + javaName.substring(1);
            for (Method m : c.getDeclaredMethods()) {
                if (m.getParameterCount() == 0 && (m.getName().equals(getter) || m.getName().equals(javaName))) {
                    JsonProperty p = m.getAnnotation(JsonProperty.class);
                    if (p != null && !p.value().isEmpty()) {
                        return p.value();
                    }
                }
            }
        }
        return null;
    }
}
