# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
NUM_DDIM_STEPS, GUIDANCE_SCALE, TOKENS, EMB = 4, 7.5, 6, 16


class TinyUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in, self.conv_out = nn.Conv2d(4, 16, 3, padding=1), nn.Conv2d(16, 4, 3, padding=1)
        self.to_k, self.to_v, self.to_q = nn.Linear(EMB, 16), nn.Linear(EMB, 16), nn.Linear(16, 16)
        self.time = nn.Linear(1, 16)

    def forward(self, latent, t, encoder_hidden_states):
        h = F.silu(self.conv_in(latent) + self.time(t.view(1, 1).float() / 1000)[:, :, None, None])
        q = self.to_q(h.flatten(2).transpose(1, 2))
        k, v = self.to_k(encoder_hidden_states), self.to_v(encoder_hidden_states)
        attn = torch.softmax(q @ k.transpose(1, 2) / 4.0, dim=-1) @ v
        return self.conv_out(h + attn.transpose(1, 2).view_as(h))


class PNDMScheduler:
    def __init__(self, num_train_timesteps=1000):
        self.alphas_cumprod = torch.cumprod(1 - torch.linspace(0.00085, 0.012, num_train_timesteps), 0)
        self.num_train_timesteps, self.ets = num_train_timesteps, []

    def set_timesteps(self, n):
        self.num_inference_steps = n
        self.timesteps = torch.arange(n - 1, -1, -1) * (self.num_train_timesteps // n) + 1

    def step(self, model_output, timestep, sample):
        prev_timestep = timestep - self.num_train_timesteps // self.num_inference_steps
        self.ets.append(model_output)
        if len(self.ets) == 1:
            model_output = self.ets[-1]
        elif len(self.ets) == 2:
            model_output = (3 * self.ets[-1] - self.ets[-2]) / 2
        else:
            model_output = (23 * self.ets[-1] - 16 * self.ets[-2] + 5 * self.ets[-3]) / 12
        a_t, a_prev = self.alphas_cumprod[timestep], self.alphas_cumprod[max(int(prev_timestep), 0)]
        pred_x0 = (sample - (1 - a_t) ** 0.5 * model_output) / a_t ** 0.5
        return a_prev ** 0.5 * pred_x0 + (1 - a_prev) ** 0.5 * model_output


class NullInversion:
    def __init__(self, unet, scheduler):
        self.unet, self.scheduler = unet, scheduler
        self.scheduler.set_timesteps(NUM_DDIM_STEPS)

    def prev_step(self, model_output, timestep, sample):
        prev_timestep = timestep - self.scheduler.num_train_timesteps // self.scheduler.num_inference_steps
        a_t, a_prev = self.scheduler.alphas_cumprod[timestep], self.scheduler.alphas_cumprod[max(int(prev_timestep), 0)]
        pred_x0 = (sample - (1 - a_t) ** 0.5 * model_output) / a_t ** 0.5
        return a_prev ** 0.5 * pred_x0 + (1 - a_prev) ** 0.5 * model_output

    def get_noise_pred_single(self, latents, t, context):
        return self.unet(latents, t, encoder_hidden_states=context)

    def null_optimization(self, latents, cond_embeddings, uncond_embeddings, num_inner_steps=3):
        uncond_embeddings_list = []
        latent_cur = latents[-1]
        for i in range(NUM_DDIM_STEPS):
            uncond_embeddings = uncond_embeddings.clone().detach().requires_grad_(True)
            optimizer = torch.optim.Adam([uncond_embeddings], lr=1e-2 * (1.0 - i / 100.0))
            latent_prev = latents[len(latents) - i - 2]
            t = self.scheduler.timesteps[i]
            with torch.no_grad():
                noise_pred_cond = self.get_noise_pred_single(latent_cur, t, cond_embeddings)
            for j in range(num_inner_steps):
                noise_pred_uncond = self.get_noise_pred_single(latent_cur, t, uncond_embeddings)
                noise_pred = noise_pred_uncond + GUIDANCE_SCALE * (noise_pred_cond - noise_pred_uncond)  # expect: forward
                latents_prev_rec = self.scheduler.step(noise_pred, t, latent_cur)
                loss = F.mse_loss(latents_prev_rec, latent_prev)
                optimizer.zero_grad()
                loss.backward()  # expect: raises frees
                optimizer.step()
            uncond_embeddings_list.append(uncond_embeddings[:1].detach())
            with torch.no_grad():
                noise_pred = self.get_noise_pred_single(latent_cur, t, uncond_embeddings)
                latent_cur = self.prev_step(noise_pred + GUIDANCE_SCALE * (noise_pred_cond - noise_pred), t, latent_cur)
            print(f"step {i} loss {loss.item():.5f}")
        return uncond_embeddings_list

inverter = NullInversion(TinyUNet().requires_grad_(False), PNDMScheduler())
ddim_latents = [torch.randn(1, 4, 8, 8) * (1 + 0.1 * k) for k in range(NUM_DDIM_STEPS + 1)]
cond_embeddings, uncond_embeddings = torch.randn(1, TOKENS, EMB), torch.zeros(1, TOKENS, EMB)
inverter.null_optimization(ddim_latents, cond_embeddings, uncond_embeddings)
