# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F


class NeRF(nn.Module):
    def __init__(self, W=32, n_freq=4):
        super().__init__()
        self.n_freq = n_freq
        self.mlp = nn.Sequential(nn.Linear(3 + 6 * n_freq, W), nn.ReLU(), nn.Linear(W, W), nn.ReLU(), nn.Linear(W, 4))

    def forward(self, pts):
        enc = [pts] + [f(2.0 ** k * pts) for k in range(self.n_freq) for f in (torch.sin, torch.cos)]
        return self.mlp(torch.cat(enc, -1))


def raw2outputs(raw, z_vals):
    dists = torch.cat([z_vals[..., 1:] - z_vals[..., :-1], torch.full_like(z_vals[..., :1], 1e10)], -1)
    alpha = 1.0 - torch.exp(-F.relu(raw[..., 3]) * dists)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[..., :1]), 1.0 - alpha + 1e-10], -1), -1)[..., :-1]
    weights = alpha * trans
    return (weights[..., None] * torch.sigmoid(raw[..., :3])).sum(-2), weights


def sample_pdf(bins, weights, n_samples):
    pdf = (weights + 1e-5) / (weights + 1e-5).sum(-1, keepdim=True)
    cdf = torch.cat([torch.zeros_like(pdf[..., :1]), torch.cumsum(pdf, -1)], -1)
    u = torch.linspace(0, 1, n_samples).expand(*cdf.shape[:-1], n_samples).contiguous()
    inds = torch.searchsorted(cdf, u, right=True).clamp(1, cdf.shape[-1] - 1)
    cdf_g0, cdf_g1 = torch.gather(cdf, -1, inds - 1), torch.gather(cdf, -1, inds)
    b0, b1 = torch.gather(bins, -1, inds - 1), torch.gather(bins, -1, inds)
    t = (u - cdf_g0) / torch.where(cdf_g1 - cdf_g0 < 1e-5, torch.ones_like(cdf_g0), cdf_g1 - cdf_g0)
    return b0 + t * (b1 - b0)  # expect: forward


def ray_batches(n_images=2, n_rays=32):
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        for img_i in range(n_images):
            rays_o, rays_d = torch.zeros(n_rays, 3), F.normalize(torch.randn(n_rays, 3, generator=g), dim=-1)
            yield img_i, rays_o, rays_d, torch.rand(n_rays, 3, generator=g)


SAMPLE_CACHE = {}


def render_rays(coarse, fine, img_i, rays_o, rays_d, near=2.0, far=6.0, n_coarse=16, n_fine=16):
    z_vals = torch.linspace(near, far, n_coarse).expand(rays_o.shape[0], n_coarse)
    pts = rays_o[:, None] + rays_d[:, None] * z_vals[..., None]
    rgb_c, weights = raw2outputs(coarse(pts), z_vals)
    if img_i not in SAMPLE_CACHE:
        z_mid = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
        SAMPLE_CACHE[img_i] = sample_pdf(z_mid, weights[..., 1:-1], n_fine)
    z_all, _ = torch.sort(torch.cat([z_vals, SAMPLE_CACHE[img_i]], -1), -1)
    pts_f = rays_o[:, None] + rays_d[:, None] * z_all[..., None]
    rgb_f, _ = raw2outputs(fine(pts_f), z_all)
    return rgb_c, rgb_f


torch.manual_seed(0)
coarse, fine = NeRF(), NeRF()
optimizer = torch.optim.Adam(list(coarse.parameters()) + list(fine.parameters()), lr=5e-4)
for step, (img_i, rays_o, rays_d, target) in enumerate(ray_batches()):
    rgb_c, rgb_f = render_rays(coarse, fine, img_i, rays_o, rays_d)
    loss = F.mse_loss(rgb_c, target) + F.mse_loss(rgb_f, target)
    optimizer.zero_grad()
    loss.backward()  # expect: raises frees
    optimizer.step()
    print(f"step {step} img {img_i} loss {loss.item():.4f}")
