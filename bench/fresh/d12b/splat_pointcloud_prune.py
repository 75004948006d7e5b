# expect-cause: carried-state
import torch
import torch.nn.functional as F


class Scene:
    def __init__(self, points, rgbs, viewmats, Ks, images):
        self.viewmats, self.Ks, self.images = viewmats, Ks, images
        self.gaussians = {
            "means": torch.nn.Parameter(points.clone()),
            "scales": torch.nn.Parameter(torch.full((len(points), 1), -0.5)),
            "opacities": torch.nn.Parameter(torch.zeros(len(points))),
            "colors": torch.nn.Parameter(torch.logit(rgbs.clamp(0.01, 0.99))),
        }


def rasterize(g, viewmat, K, H=16, W=16):
    cam = g["means"] @ viewmat[:3, :3].T + viewmat[:3, 3]
    uv = cam @ K.T
    uv = uv[:, :2] / uv[:, 2:].clamp_min(1e-3)
    ys, xs = torch.meshgrid(torch.arange(H).float(), torch.arange(W).float(), indexing="ij")
    d2 = (xs[..., None] - uv[:, 0]) ** 2 + (ys[..., None] - uv[:, 1]) ** 2
    w = torch.sigmoid(g["opacities"]) * torch.exp(-d2 / (2 * torch.exp(g["scales"][:, 0]) ** 2 + 1e-6))
    return (w @ torch.sigmoid(g["colors"])) / (w.sum(-1, keepdim=True) + 1e-6)


def ssim(a, b, C1=0.01 ** 2, C2=0.03 ** 2):
    a, b = a.permute(2, 0, 1)[None], b.permute(2, 0, 1)[None]
    mu_a, mu_b = F.avg_pool2d(a, 3, 1, 1), F.avg_pool2d(b, 3, 1, 1)
    s_a = F.avg_pool2d(a * a, 3, 1, 1) - mu_a ** 2
    s_b = F.avg_pool2d(b * b, 3, 1, 1) - mu_b ** 2
    s_ab = F.avg_pool2d(a * b, 3, 1, 1) - mu_a * mu_b
    return (((2 * mu_a * mu_b + C1) * (2 * s_ab + C2)) / ((mu_a ** 2 + mu_b ** 2 + C1) * (s_a + s_b + C2))).mean()


def run_3dgs_optim(scene, iters, enable_pruning, loss_ssim_fac, loss_opacity_fac, loss_scale_fac, verbose):
    optimizer = torch.optim.Adam(list(scene.gaussians.values()), lr=0.05)
    losses = []
    for step in range(iters):
        i = step % len(scene.images)
        render = rasterize(scene.gaussians, scene.viewmats[i], scene.Ks[i])
        gt = scene.images[i]
        loss = (1 - loss_ssim_fac) * (render - gt).abs().mean() + loss_ssim_fac * (1 - ssim(render, gt))
        loss += loss_opacity_fac * torch.abs(torch.sigmoid(scene.gaussians["opacities"])).mean()
        loss += loss_scale_fac * torch.abs(torch.exp(scene.gaussians["scales"])).mean()

        loss.backward()  # expect: raises frees
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if enable_pruning and step % 5 == 4:
            keep = torch.sigmoid(scene.gaussians["opacities"]) > 0.45
            for k in scene.gaussians:
                scene.gaussians[k] = scene.gaussians[k][keep]  # expect: forward
        if verbose:
            print(step, f"{loss.item():.4f}", len(scene.gaussians["means"]))
    return losses


torch.manual_seed(0)
points, rgbs = torch.randn(64, 3) * 0.5, torch.rand(64, 3)
viewmats = []
for tx in (-0.2, 0.0, 0.2):
    v = torch.eye(4)
    v[:3, 3] = torch.tensor([tx, 0.0, 4.0])
    viewmats.append(v)
Ks = [torch.tensor([[20.0, 0, 8], [0, 20.0, 8], [0, 0, 1]])] * 3
images = [torch.rand(16, 16, 3) for _ in range(3)]
scene = Scene(points, rgbs, viewmats, Ks, images)
run_3dgs_optim(scene, iters=12, enable_pruning=True, loss_ssim_fac=0.2, loss_opacity_fac=0.01,
               loss_scale_fac=0.01, verbose=True)
