package perfscope.springapp;

import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

@RestController
public class TruthController {
    @GetMapping(value = "/truth", produces = MediaType.APPLICATION_JSON_VALUE)
    public String truth() {
        return AllocationTruthFilter.snapshotJson();
    }
}
